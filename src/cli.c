#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

void hs_cli_print_usage(void) {
    printf("usage: hetseq <command> [options]\n"
           "\n"
           "commands:\n"
           "  train CONFIG [-o group.key=value ...]   train the experiment described by the libconfig file CONFIG;\n"
           "                                          resumes from <checkpoint.save_dir>/checkpoint_last.h5 if present\n"
           "  eval CONFIG --checkpoint FILE [-o ...]  evaluate a checkpoint on the validation/test split\n"
           "  prep mnist --in DIR --out FILE.h5       convert MNIST-format IDX files (gzipped or not) to HDF5\n"
           "       [--limit-train N] [--limit-test N]\n"
           "  prep repack --in FILE_OR_DIR --out DIR  rewrite BERT shards with row chunks (fast row reads)\n"
           "       [--rows-per-chunk 64] [--gzip 0..9]\n"
           "  prep vocab --corpus PATH... --size N --out vocab.txt   learn a WordPiece vocabulary from text\n"
           "       [--cased] [--min-frequency 2] [--limit-alphabet 1000] [--strict]\n"
           "  prep bert --corpus PATH... --vocab vocab.txt --out DIR   text -> NVIDIA-format BERT shards\n"
           "       [--seq-len 128] [--max-pred 20] [--masked-lm-prob 0.15] [--short-seq-prob 0.1]\n"
           "       [--dupe-factor 5] [--shards 1] [--seed 12345] [--valid-fraction 0] [--test-shards M]\n"
           "       [--cased] [--strict] [--split-sentences auto|lines|prose] [--prefix corpus]\n"
           "\n"
           "options:\n"
           "  -o, --set group.key=value   override one configuration key (type-checked; repeatable)\n"
           "  -h, --help                  this help\n"
           "  -V, --version               print the version\n"
           "\n"
           "Launch on N ranks with: mpirun -np N hetseq train conf/mnist.cfg (or srun in a Slurm job).\n"
           "Configuration reference: docs/configuration.md\n");
}

static void add_override(hs_cli *cli, const char *kv) {
    if (!strchr(kv, '='))
        hs_die_all("-o %s: expected group.key=value, e.g. -o optimizer.lr=0.5", kv);
    HS_REALLOC(cli->overrides, cli->n_overrides + 1);
    cli->overrides[cli->n_overrides++] = HS_STRDUP(kv);
}

void hs_cli_parse(hs_cli *cli, int argc, char **argv) {
    memset(cli, 0, sizeof *cli);
    if (argc < 2) {
        hs_cli_print_usage();
        hs_die_all("no command given");
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        cli->command = "help";
        return;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        cli->command = "version";
        return;
    }
    if (!strcmp(cmd, "prep")) {
        cli->command = "prep";
        cli->prep_argc = argc - 2;
        cli->prep_argv = argv + 2;
        return;
    }
    if (strcmp(cmd, "train") != 0 && strcmp(cmd, "eval") != 0)
        hs_die_all("unknown command '%s' (expected train, eval, prep; see hetseq --help)", cmd);
    cli->command = cmd;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--set")) {
            if (i + 1 >= argc) hs_die_all("%s needs an argument group.key=value", a);
            add_override(cli, argv[++i]);
        } else if (!strncmp(a, "-o", 2) && a[2]) {
            add_override(cli, a + 2);
        } else if (!strncmp(a, "--set=", 6)) {
            add_override(cli, a + 6);
        } else if (!strcmp(a, "--checkpoint")) {
            if (i + 1 >= argc) hs_die_all("--checkpoint needs a file name");
            cli->checkpoint = argv[++i];
        } else if (!strncmp(a, "--checkpoint=", 13)) {
            cli->checkpoint = a + 13;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli->command = "help";
            return;
        } else if (a[0] == '-') {
            hs_die_all("unknown option '%s' for hetseq %s (see hetseq --help)", a, cmd);
        } else if (!cli->config_path) {
            cli->config_path = a;
        } else {
            hs_die_all("unexpected argument '%s': hetseq %s takes one CONFIG file", a, cmd);
        }
    }
    if (!cli->config_path) hs_die_all("hetseq %s needs a CONFIG file (e.g. conf/mnist.cfg)", cmd);
    if (!strcmp(cmd, "eval") && !cli->checkpoint)
        hs_die_all("hetseq eval needs --checkpoint FILE (e.g. checkpoints/checkpoint_last.h5)");
}

void hs_cli_free(hs_cli *cli) {
    for (int i = 0; i < cli->n_overrides; i++) free(cli->overrides[i]);
    free(cli->overrides);
    memset(cli, 0, sizeof *cli);
}
