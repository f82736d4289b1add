/* The one place launch configurations are decided. Element-wise kernels use grid-stride loops over a
 * grid capped at HS_MAX_GRID blocks of HS_BLOCK threads (enough to fill any current GPU: 108 SMs x 2048
 * resident threads on an A100 = 221k threads < 1024 x 256), so a launch never depends on n beyond that. */
#ifndef HS_KERNELS_LAUNCH_H
#define HS_KERNELS_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#define HS_BLOCK 256
#define HS_MAX_GRID 1024

/* Blocks for n independent elements with a grid-stride loop (at least 1, so n = 0 still launches a
 * valid, empty grid). */
static inline unsigned hs_grid_for(size_t n) {
    size_t blocks = (n + HS_BLOCK - 1) / HS_BLOCK;
    if (blocks < 1) blocks = 1;
    if (blocks > HS_MAX_GRID) blocks = HS_MAX_GRID;
    return (unsigned)blocks;
}

/* Element-wise kernels over memory-bound data move HS_VEC values per thread step (one 16-byte load of
 * fp32, 8 bytes of 16-bit data) where every pointer is aligned for it, then the n % HS_VEC tail one by
 * one: a scalar 4-byte load per thread keeps too few bytes in flight to reach a GPU's bandwidth.
 * Element-wise results do not depend on how the elements are grouped. */
#define HS_VEC 4
static inline int hs_aligned(const void *p, size_t bytes) { return (uintptr_t)p % bytes == 0; }

/* Element-wise kernels over a matrix whose column index matters (row gathers, loss gradients): grid
 * (hs_grid_cols(cols), hs_grid_rows_y(rows)), both dimensions grid-strided, so no thread divides a flat
 * index by cols (a 64-bit division per element costs more than the element's memory traffic). */
#define HS_MAX_GRID_Y 65535
static inline unsigned hs_grid_cols(size_t cols) { return hs_grid_for(cols); }
static inline unsigned hs_grid_rows_y(size_t rows) {
    return (unsigned)(rows < 1 ? 1 : rows > HS_MAX_GRID_Y ? HS_MAX_GRID_Y : rows);
}

/* Row kernels (LayerNorm, losses): one warp per row, HS_ROWS_PER_BLOCK rows per block of HS_BLOCK
 * threads, rows grid-strided over at most HS_MAX_GRID blocks. A row's reduction is a fixed butterfly
 * over the 32 lanes, so its result does not depend on the grid. */
#define HS_WARP 32
#define HS_ROWS_PER_BLOCK (HS_BLOCK / HS_WARP)

static inline unsigned hs_grid_for_rows(size_t rows) {
    size_t blocks = (rows + HS_ROWS_PER_BLOCK - 1) / HS_ROWS_PER_BLOCK;
    if (blocks < 1) blocks = 1;
    if (blocks > HS_MAX_GRID) blocks = HS_MAX_GRID;
    return (unsigned)blocks;
}

/* Multi-tensor ops (kernels/multi_tensor.cu) launch HS_TENSOR_GRID blocks whatever the table (the host
 * cannot read the device tensor table): the flat buffer is cut into chunks of HS_TENSOR_CHUNK floats,
 * block b takes chunks b, b + HS_TENSOR_GRID, ..., and in each the pieces of the tensors that overlap
 * it. Norms are summed per (tensor, block), then a tensor's blocks in the order of its chunks: the order
 * depends on the table's layout alone. 512 blocks are one wave on any GPU with 64 or more SMs (8 blocks
 * of 256 threads each) and keep 8 MB of 16-byte loads in flight; a chunk is 16 steps of a block. */
#define HS_TENSOR_GRID 512
#define HS_TENSOR_CHUNK 16384

/* LayerNorm backward sums dgamma/dbeta over chunks of HS_LN_ROW_CHUNK rows (rows in order inside a
 * chunk, then chunks in order), the CPU's HS_LN_ROW_BLOCK, so both backends add in the same order. */
#define HS_LN_ROW_CHUNK 32

#endif
