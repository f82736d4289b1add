/* Command line: `hetseq train CONFIG [-o key=value ...]`, `hetseq eval CONFIG --checkpoint FILE
 * [--split valid|test] [--report FILE.json] [--warmup-steps N] [-o key=value ...]`, `hetseq prep mnist ...`,
 * `hetseq --help`, `hetseq --version`. */
#ifndef HS_CLI_H
#define HS_CLI_H

/* The options of `hetseq eval` (docs/evaluation.md). */
typedef struct hs_eval_options {
    const char *checkpoint;  /* --checkpoint FILE (required) */
    const char *split;       /* --split: "valid" (default) or "test" */
    const char *report_path; /* --report FILE.json, or NULL */
    int warmup_steps;        /* --warmup-steps: leading steps left out of the latency figures (default 2) */
} hs_eval_options;

typedef struct hs_cli {
    const char *command;     /* "train" | "eval" | "prep" | "help" | "version" */
    const char *config_path; /* train, eval */
    hs_eval_options eval;    /* eval */
    int n_overrides;
    char **overrides;        /* "group.key=value" */
    int prep_argc;           /* prep: arguments after "prep" */
    char **prep_argv;
} hs_cli;

/* Parses argv; a usage error prints the message and usage and ends every rank (hs_die_all). */
void hs_cli_parse(hs_cli *cli, int argc, char **argv);
void hs_cli_free(hs_cli *cli);
/* 1 when argv asks for help or the version (hetseq --help, -h, help, --version, -V, version, or a -h /
 * --help among train's or eval's options): a command that computes nothing, so start-up work meant for
 * computing (the OpenBLAS kernel probe, train/blas_autofix.h) is skipped. Reads argv only (before MPI). */
int hs_cli_computes_nothing(int argc, char **argv);
void hs_cli_print_usage(void);

#endif
