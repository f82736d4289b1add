/* The one place launch configurations are decided. Element-wise kernels use grid-stride loops over a
 * grid capped at HS_MAX_GRID blocks of HS_BLOCK threads (enough to fill any current GPU: 108 SMs x 2048
 * resident threads on an A100 = 221k threads < 1024 x 256), so a launch never depends on n beyond that. */
#ifndef HS_KERNELS_LAUNCH_H
#define HS_KERNELS_LAUNCH_H

#include <stddef.h>

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

#endif
