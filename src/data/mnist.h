/* The MNIST HDF5 file written by `hetseq prep mnist`: datasets train/images uint8[N,28,28],
 * train/labels uint8[N], test/images, test/labels (docs/data-formats.md). Opened on the I/O
 * communicator with the MPI-IO driver; rows are read with collective transfers in the on-disk type. */
#ifndef HS_DATA_MNIST_H
#define HS_DATA_MNIST_H

#include <mpi.h>
#include <stdint.h>

#define HS_MNIST_ROWS 28
#define HS_MNIST_COLS 28
#define HS_MNIST_PIXELS (HS_MNIST_ROWS * HS_MNIST_COLS)
#define HS_MNIST_CLASSES 10 /* labels are 0..9 */

typedef struct hs_mnist_file hs_mnist_file;

/* Collective over io_comm. A missing file, a missing dataset, a wrong dtype or shape, or inconsistent
 * row counts are user errors naming the file and dataset. */
hs_mnist_file *hs_mnist_open(const char *path, MPI_Comm io_comm);
/* split: 0 = train, 1 = test. */
int64_t hs_mnist_num_samples(const hs_mnist_file *f, int split);
/* Collective: every rank calls it; count may be 0 (empty selection). images[count*784], labels[count]. */
void hs_mnist_read(hs_mnist_file *f, int split, int64_t first, int count, uint8_t *images, uint8_t *labels);
/* Why HDF5 did not read collectively: the OR of H5Pget_mpio_no_collective_cause (local and global)
 * over every read since open; 0 = every transfer was collective. For tests and diagnostics. */
uint32_t hs_mnist_no_collective_cause(const hs_mnist_file *f);
/* Collective (H5Fclose on the I/O communicator); call it from the thread that did the reads, or after
 * that thread has stopped. */
void hs_mnist_close(hs_mnist_file *f);

#endif
