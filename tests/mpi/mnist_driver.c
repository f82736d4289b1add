/* Drives the data layer from the shell tests, on any number of ranks:
 *   mnist_driver prep mnist --in DIR --out FILE.h5 [...]   exactly `hetseq prep mnist ...`
 *   mnist_driver read FILE.h5                              open collectively and read one micro-batch
 *                                                          of the train split per rank (rank r: rows
 *                                                          [10r, 10r+10)) and one EMPTY one, as training
 *                                                          would; prints the row count and a checksum */
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"
#include "data/mnist.h"
#include "prep/prep.h"
#include "util/check.h"

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    int status = 0;
    if (argc >= 3 && !strcmp(argv[1], "prep") && !strcmp(argv[2], "mnist")) {
        status = hs_prep_mnist_main(argc - 2, argv + 2, &comm);
    } else if (argc == 3 && !strcmp(argv[1], "read")) {
        hs_mnist_file *f = hs_mnist_open(argv[2], comm.io);
        int64_t n = hs_mnist_num_samples(f, 0);
        int64_t first = 10 * (int64_t)comm.rank;
        int count = first + 10 <= n ? 10 : 0;
        uint8_t images[10 * HS_MNIST_PIXELS], labels[10];
        hs_mnist_read(f, 0, first, count, images, labels);
        hs_mnist_read(f, 0, 0, 0, images, labels);
        unsigned long sum = 0;
        for (int i = 0; i < count * HS_MNIST_PIXELS; i++) sum += images[i];
        printf("rank %d: %lld train rows, %lld test rows, read %d, pixel sum %lu\n", comm.rank, (long long)n,
               (long long)hs_mnist_num_samples(f, 1), count, sum);
        hs_mnist_close(f);
    } else {
        if (comm.rank == 0) fprintf(stderr, "usage: mnist_driver prep mnist ARGS... | mnist_driver read FILE.h5\n");
        status = 2;
    }
    hs_comm_finalize(&comm);
    return status;
}
