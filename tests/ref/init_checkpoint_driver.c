/* Helper of tests/ref/test_convert_roundtrip.py: loads a weights-only checkpoint the way
 * `checkpoint.init_checkpoint` does (hs_checkpoint_load with no optimizer and no train state) into a
 * parameter table declared from the command line, and prints every tensor as hex floats, so the Python
 * side can compare them bit for bit with what it converted.
 *   init_checkpoint_driver FILE NAME:D0xD1... [NAME:D0...]...
 *   -> "<name> <%a> <%a> ..." per tensor */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"

/* "bert.pooler.dense_act.weight:32x32" -> name and shape; returns ndim, 0 on a malformed spec. */
static int parse_spec(char *spec, char **name, int64_t shape[HS_MAX_DIMS]) {
    char *colon = strrchr(spec, ':');
    if (!colon) return 0;
    *colon = '\0';
    *name = spec;
    int ndim = 0;
    for (char *tok = strtok(colon + 1, "x"); tok; tok = strtok(NULL, "x")) {
        if (ndim == HS_MAX_DIMS) return 0;
        shape[ndim++] = strtoll(tok, NULL, 10);
    }
    return ndim;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s FILE NAME:D0xD1... ...\n", argv[0]);
        return 2;
    }
    hs_params p;
    memset(&p, 0, sizeof p);
    for (int a = 2; a < argc; a++) {
        char *name;
        int64_t shape[HS_MAX_DIMS];
        int ndim = parse_spec(argv[a], &name, shape);
        if (ndim == 0) {
            fprintf(stderr, "bad tensor spec '%s'\n", argv[a]);
            return 2;
        }
        hs_params_declare(&p, name, ndim, shape, 1);
    }
    hs_params_allocate(&p, hs_backend_cpu());
    hs_checkpoint_load(argv[1], &p, NULL, NULL, NULL);
    float *host = calloc(p.total, sizeof(float));
    if (!host) return 2;
    p.be->download(p.be, host, p.data, p.total * sizeof(float));
    for (int t = 0; t < p.count; t++) {
        printf("%s", p.tensors[t].name);
        for (size_t k = 0; k < p.tensors[t].numel; k++) printf(" %a", (double)host[p.tensors[t].offset + k]);
        printf("\n");
    }
    free(host);
    hs_params_free(&p);
    return 0;
}
