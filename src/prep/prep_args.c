/* The command line of a `hetseq prep ...` subcommand (see prep_args.h). */
#include "prep/prep_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_flag(const hs_prep_cli *cli, const char *opt) {
    for (const char *const *f = cli->flags; f && *f; f++)
        if (!strcmp(opt, *f)) return 1;
    return 0;
}

int hs_prep_parse_args(const hs_prep_cli *cli, int argc, char **argv, int rank, void *args) {
    char err[HS_PREP_ERR_LEN] = "";
    for (int i = 1; i < argc && !err[0]; i++) {
        const char *opt = argv[i];
        if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
            if (rank == 0) printf("%s\n", cli->usage);
            return -1;
        }
        if (is_flag(cli, opt)) {
            cli->option(args, opt, NULL, err, sizeof err);
            continue;
        }
        if (cli->list_option && !strcmp(opt, cli->list_option)) {
            int before = i;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 && !err[0])
                cli->option(args, opt, argv[++i], err, sizeof err);
            if (i == before) cli->option(args, opt, NULL, err, sizeof err);
            continue;
        }
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "option %s needs a value", opt);
            break;
        }
        const char *val = argv[++i];
        cli->option(args, opt, val, err, sizeof err);
    }
    if (!err[0] && cli->finish) cli->finish(args, err, sizeof err);
    if (!err[0]) return 0;
    if (rank == 0) fprintf(stderr, "hetseq: error: prep %s: %s\n%s\n", cli->command, err, cli->usage);
    return 1;
}

int hs_prep_parse_count(const char *opt, const char *val, long long lo, long long hi, long long *out, char *err,
                        size_t errlen) {
    char *end;
    errno = 0;
    long long v = strtoll(val, &end, 10);
    if (errno || *end || end == val || v < lo || v > hi) {
        snprintf(err, errlen, "%s %s: expected a whole number from %lld to %lld", opt, val, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}
