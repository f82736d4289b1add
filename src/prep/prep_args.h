/* The command line of a `hetseq prep ...` subcommand: one walk over argv shared by every subcommand,
 * so all of them treat --help, flags, a missing value and errors the same way. */
#ifndef HS_PREP_PREP_ARGS_H
#define HS_PREP_PREP_ARGS_H

#include <stddef.h>

/* Bytes of the message buffer the callbacks write into. */
#define HS_PREP_ERR_LEN 512

typedef struct hs_prep_cli {
    const char *command;      /* "mnist": errors read "hetseq: error: prep mnist: ..." */
    const char *usage;        /* printed for --help, and after an error */
    const char *const *flags; /* options without a value, NULL-terminated; or NULL */
    const char *list_option;  /* an option taking every argument up to the next "--..." (--corpus); or NULL */
    /* Called for each option in order. val is its value; NULL for a flag; for list_option once per
     * argument, or once with NULL when none follows. A problem goes into err (empty on entry). */
    void (*option)(void *args, const char *opt, const char *val, char *err, size_t errlen);
    /* Called after the last option when nothing was wrong: checks what is required. NULL: nothing. */
    void (*finish)(void *args, char *err, size_t errlen);
} hs_prep_cli;

/* Walks argv[1..argc) (argv[0] is the subcommand), stopping at the first problem. Identical on every
 * rank: returns 0, -1 for -h/--help (rank 0 printed the usage), or 1 after rank 0 printed what is wrong
 * and the usage. Any other option takes the next argument as its value. */
int hs_prep_parse_args(const hs_prep_cli *cli, int argc, char **argv, int rank, void *args);

/* A whole number from lo to hi in *out: 0, or -1 with "OPT VAL: expected a whole number from LO to HI"
 * in err (and *out unchanged). */
int hs_prep_parse_count(const char *opt, const char *val, long long lo, long long hi, long long *out, char *err,
                        size_t errlen);

#endif
