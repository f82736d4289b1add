/* hetseq: data-parallel training for heterogeneous clusters. mpirun/srun creates the ranks; every rank
 * runs this same program. */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "build_config.h"
#include "cli.h"
#include "comm/comm.h"
#include "config.h"
#include "prep/prep.h"
#include "train/blas_autofix.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/log.h"

int main(int argc, char **argv) {
    /* before MPI and before OpenBLAS computes: may re-execute this program with OPENBLAS_CORETYPE set */
    hs_blas_autofix(argc, argv);
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    hs_blas_autofix_report();
    /* hetseq reports HDF5 failures itself (file, dataset, what to do). */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    hs_cli cli;
    hs_cli_parse(&cli, argc, argv);
    int status = 0;
    if (!strcmp(cli.command, "help")) {
        if (comm.rank == 0) hs_cli_print_usage();
    } else if (!strcmp(cli.command, "version")) {
        if (comm.rank == 0) printf("hetseq %s\n", PACKAGE_VERSION);
    } else if (!strcmp(cli.command, "prep")) {
        if (cli.prep_argc >= 1 && !strcmp(cli.prep_argv[0], "repack"))
            status = hs_prep_repack_main(cli.prep_argc, cli.prep_argv, &comm);
        else if (cli.prep_argc >= 1 && !strcmp(cli.prep_argv[0], "bert"))
            status = hs_prep_bert_main(cli.prep_argc, cli.prep_argv, &comm);
        else if (cli.prep_argc >= 1 && !strcmp(cli.prep_argv[0], "vocab"))
            status = hs_prep_vocab_main(cli.prep_argc, cli.prep_argv, &comm);
        else if (cli.prep_argc >= 1 && !strcmp(cli.prep_argv[0], "lm"))
            status = hs_prep_lm_main(cli.prep_argc, cli.prep_argv, &comm);
        else if (cli.prep_argc < 1 || strcmp(cli.prep_argv[0], "mnist") != 0)
            hs_die_all("hetseq prep: expected a kind of data: hetseq prep mnist --in DIR --out FILE.h5, "
                       "hetseq prep repack --in DIR --out DIR2, hetseq prep vocab --corpus PATH --size N --out FILE, "
                       "hetseq prep bert --corpus PATH --vocab FILE --out DIR, "
                       "or hetseq prep lm --in DIR|--raw PATH... --out DIR");
        else status = hs_prep_mnist_main(cli.prep_argc, cli.prep_argv, &comm);
    } else {
        hs_config *cfg = hs_config_load(cli.config_path, cli.n_overrides, cli.overrides);
        if (!strcmp(cli.command, "train")) status = hs_train_main(cfg, &comm);
        else status = hs_eval_main(cfg, &cli.eval, &comm);
        hs_config_free(cfg);
    }
    hs_cli_free(&cli);
    hs_comm_finalize(&comm);
    return status;
}
