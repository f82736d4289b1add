#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
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
           "  eval CONFIG --checkpoint FILE [-o ...]  evaluate a checkpoint on the validation/test split: loss, task\n"
           "       [--split valid|test]               metrics, throughput, latency percentiles (docs/evaluation.md)\n"
           "       [--report FILE.json] [--warmup-steps 2]\n"
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
           "  prep lm --in DIR --out DIR              WikiText-format token files -> language-model data (lm.h5)\n"
           "       [--train FILE] [--valid FILE] [--test FILE]\n"
           "       [--min-freq 0] [--max-size N] [--lower-case] [--skip-empty-lines]\n"
           "  prep lm --raw PATH... --out DIR         ordinary text -> WikiText format -> lm.h5\n"
           "       [--valid-fraction 0.05] [--test-fraction 0.05] [--seed 12345] [--write-tokens DIR]\n"
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

enum { OPT_CHECKPOINT = 256, OPT_SPLIT, OPT_REPORT, OPT_WARMUP };

/* --warmup-steps N: a whole number >= 0 (strtol with the whole argument consumed). */
static int parse_warmup(const char *arg) {
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || errno || v < 0 || v > INT_MAX)
        hs_die_all("--warmup-steps %s: expected a whole number >= 0 of evaluation steps to leave out of the "
                   "latency figures (e.g. --warmup-steps 2)", arg);
    return (int)v;
}

/* The options of train and eval, read with getopt_long: `-o X`, `-oX`, `--set X`, `--set=X`,
 * `--checkpoint X`, `--checkpoint=X`, `-h`, `--help`, and eval's --split, --report, --warmup-steps (train
 * refuses eval's options); options and the CONFIG file in any order. */
static void parse_train_eval(hs_cli *cli, int argc, char **argv) {
    static const struct option longopts[] = {
        {"set", required_argument, NULL, 'o'},
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {"split", required_argument, NULL, OPT_SPLIT},
        {"report", required_argument, NULL, OPT_REPORT},
        {"warmup-steps", required_argument, NULL, OPT_WARMUP},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = cli->command;
    const char *eval_option = NULL; /* the last option of eval given, for the message if this is train */
    /* argv[0] here is the command; optind = 0 makes glibc start afresh (this may run more than once
     * in a process, e.g. in tests). The leading '-' returns CONFIG in place (code 1) instead of
     * permuting argv, so the order of the command line is kept even under POSIXLY_CORRECT; the ':'
     * reports a missing argument as ':' rather than '?'. opterr = 0: the messages below are ours. */
    optind = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "-:o:h", longopts, NULL)) != -1) {
        /* the argument that getopt_long just consumed or rejected, for messages */
        const char *arg = argv[optind - 1];
        switch (c) {
        case 'o': add_override(cli, optarg); break;
        case OPT_CHECKPOINT:
            cli->eval.checkpoint = optarg;
            eval_option = "--checkpoint";
            break;
        case OPT_SPLIT:
            eval_option = "--split";
            if (strcmp(optarg, "valid") != 0 && strcmp(optarg, "test") != 0)
                hs_die_all("--split %s: expected valid or test", optarg);
            cli->eval.split = optarg;
            break;
        case OPT_REPORT:
            cli->eval.report_path = optarg;
            eval_option = "--report";
            break;
        case OPT_WARMUP:
            cli->eval.warmup_steps = parse_warmup(optarg);
            eval_option = "--warmup-steps";
            break;
        case 'h': cli->command = "help"; return;
        case 1:
            /* "-" alone is no option to getopt; as before, it is not a file name either */
            if (!strcmp(optarg, "-")) hs_die_all("unknown option '-' for hetseq %s (see hetseq --help)", cmd);
            if (cli->config_path)
                hs_die_all("unexpected argument '%s': hetseq %s takes one CONFIG file", optarg, cmd);
            cli->config_path = optarg;
            break;
        case ':':
            if (optopt == OPT_CHECKPOINT) hs_die_all("--checkpoint needs a file name");
            if (optopt == OPT_SPLIT) hs_die_all("--split needs valid or test");
            if (optopt == OPT_REPORT) hs_die_all("--report needs a file name (e.g. --report eval.json)");
            if (optopt == OPT_WARMUP) hs_die_all("--warmup-steps needs a number (e.g. --warmup-steps 2)");
            hs_die_all("%s needs an argument group.key=value", strncmp(arg, "--", 2) == 0 ? "--set" : "-o");
        default: /* '?': unknown, or a value given to an option that takes none (--help=x) */
            if (optopt && optopt != '?' && strncmp(arg, "--", 2) == 0)
                hs_die_all("option '%.*s' takes no value (see hetseq --help)", (int)strcspn(arg, "="), arg);
            if (optopt) hs_die_all("unknown option '-%c' for hetseq %s (see hetseq --help)", optopt, cmd);
            hs_die_all("unknown option '%s' for hetseq %s (see hetseq --help)", arg, cmd);
        }
    }
    if (eval_option && strcmp(cmd, "eval") != 0)
        hs_die_all("%s is an option of hetseq eval, not of hetseq %s (see hetseq --help)", eval_option, cmd);
    /* after "--" every argument is a file name */
    for (; optind < argc; optind++) {
        if (cli->config_path)
            hs_die_all("unexpected argument '%s': hetseq %s takes one CONFIG file", argv[optind], cmd);
        cli->config_path = argv[optind];
    }
}

/* the command words that ask for the usage, and for the version */
static int asks_help(const char *cmd) { return !strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help"); }
static int asks_version(const char *cmd) {
    return !strcmp(cmd, "-V") || !strcmp(cmd, "--version") || !strcmp(cmd, "version");
}

int hs_cli_computes_nothing(int argc, char **argv) {
    if (argc < 2) return 1; /* the usage and an error */
    const char *cmd = argv[1];
    if (asks_help(cmd) || asks_version(cmd)) return 1;
    if (strcmp(cmd, "train") != 0 && strcmp(cmd, "eval") != 0) return 0;
    for (int i = 2; i < argc && strcmp(argv[i], "--") != 0; i++) /* as getopt: options end at "--" */
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

void hs_cli_parse(hs_cli *cli, int argc, char **argv) {
    memset(cli, 0, sizeof *cli);
    if (argc < 2) {
        hs_cli_print_usage();
        hs_die_all("no command given");
    }
    const char *cmd = argv[1];
    cli->eval.split = "valid";
    cli->eval.warmup_steps = 2;
    if (asks_help(cmd)) {
        cli->command = "help";
        return;
    }
    if (asks_version(cmd)) {
        cli->command = "version";
        return;
    }
    if (!strcmp(cmd, "prep")) { /* the prep subcommands read their own options (prep/prep_args.c) */
        cli->command = "prep";
        cli->prep_argc = argc - 2;
        cli->prep_argv = argv + 2;
        return;
    }
    if (strcmp(cmd, "train") != 0 && strcmp(cmd, "eval") != 0)
        hs_die_all("unknown command '%s' (expected train, eval, prep; see hetseq --help)", cmd);
    cli->command = cmd;
    parse_train_eval(cli, argc - 1, argv + 1);
    if (!strcmp(cli->command, "help")) return;
    if (!cli->config_path) hs_die_all("hetseq %s needs a CONFIG file (e.g. conf/mnist.cfg)", cmd);
    if (!strcmp(cmd, "eval") && !cli->eval.checkpoint)
        hs_die_all("hetseq eval needs --checkpoint FILE (e.g. checkpoints/checkpoint_last.h5)");
}

void hs_cli_free(hs_cli *cli) {
    for (int i = 0; i < cli->n_overrides; i++) free(cli->overrides[i]);
    free(cli->overrides);
    memset(cli, 0, sizeof *cli);
}
