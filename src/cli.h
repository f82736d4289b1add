/* Command line: `hetseq train CONFIG [-o key=value ...]`, `hetseq eval CONFIG --checkpoint FILE
 * [-o key=value ...]`, `hetseq prep mnist ...`, `hetseq --help`, `hetseq --version`. */
#ifndef HS_CLI_H
#define HS_CLI_H

typedef struct hs_cli {
    const char *command;     /* "train" | "eval" | "prep" | "help" | "version" */
    const char *config_path; /* train, eval */
    const char *checkpoint;  /* eval */
    int n_overrides;
    char **overrides;        /* "group.key=value" */
    int prep_argc;           /* prep: arguments after "prep" */
    char **prep_argv;
} hs_cli;

/* Parses argv; a usage error prints the message and usage and ends every rank (hs_die_all). */
void hs_cli_parse(hs_cli *cli, int argc, char **argv);
void hs_cli_free(hs_cli *cli);
void hs_cli_print_usage(void);

#endif
