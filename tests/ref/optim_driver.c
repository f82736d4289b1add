/* Runs clip + optimizer steps on the CPU backend for tests/ref/test_optim_vs_torch.py.
 *
 *   optim_driver NAME SIZES STEPS BETA1 BETA2 EPS WD RHO MOMENTUM CLIP IN OUT
 *
 * SIZES is a comma list of tensor sizes; the LAST tensor is declared without the weight-decay flag
 * (like a bias), so the test sees that only AdamW honours the flag. IN holds, packed without padding:
 *   float64 lr[STEPS], float32 p0[N], float32 grad[STEPS][N]          (N = sum of SIZES)
 * For each step the driver uploads the gradient, clips it (CLIP <= 0: norm only), steps with lr[s]
 * and writes to OUT:  float64 norm, float32 clipped_grad[N], float32 params[N];
 * after the last step:  float32 state[k][N] for each optimizer state buffer, in o->state order.
 * Exit 1 if an update touched the padding between tensors (data, grad or state buffers). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/params.h"
#include "util/check.h"
#include "optim/optimizer.h"

#define MAX_TENSORS 16

static void read_exact(FILE *f, void *buf, size_t bytes) {
    if (fread(buf, 1, bytes, f) != bytes) {
        fprintf(stderr, "optim_driver: input file too short\n");
        exit(2);
    }
}

static void write_exact(FILE *f, const void *buf, size_t bytes) {
    if (fwrite(buf, 1, bytes, f) != bytes) {
        perror("optim_driver: write");
        exit(2);
    }
}

/* Copy a packed host vector into (or out of) the padded device layout. */
static void upload_packed(hs_params *p, float *dev, const float *packed) {
    size_t at = 0;
    for (int i = 0; i < p->count; i++) {
        p->be->upload(dev + p->tensors[i].offset, packed + at, p->tensors[i].numel * sizeof(float));
        at += p->tensors[i].numel;
    }
}

static void download_packed(hs_params *p, float *packed, const float *dev) {
    size_t at = 0;
    for (int i = 0; i < p->count; i++) {
        p->be->download(packed + at, dev + p->tensors[i].offset, p->tensors[i].numel * sizeof(float));
        at += p->tensors[i].numel;
    }
}

/* The padding floats between tensors (and after the last) get a sentinel before the run; an update
 * that wrote outside a tensor's range would change one. */
#define PADDING_SENTINEL 7.0f

/* mode 0: set the padding to the sentinel; mode 1: count padding floats that differ from it. */
static size_t padding_pass(hs_params *p, float *dev, int mode) {
    float *host;
    HS_ALLOC(host, p->total);
    p->be->download(host, dev, p->total * sizeof(float));
    size_t changed = 0, next = 0;
    for (int i = 0; i <= p->count; i++) {
        size_t start = i < p->count ? p->tensors[i].offset : p->total;
        for (size_t j = next; j < start; j++) {
            if (mode == 0) host[j] = PADDING_SENTINEL;
            else changed += host[j] != PADDING_SENTINEL;
        }
        if (i < p->count) next = p->tensors[i].offset + p->tensors[i].numel;
    }
    if (mode == 0) p->be->upload(dev, host, p->total * sizeof(float));
    free(host);
    return changed;
}

int main(int argc, char **argv) {
    if (argc != 13) {
        fprintf(stderr, "usage: %s NAME SIZES STEPS BETA1 BETA2 EPS WD RHO MOMENTUM CLIP IN OUT\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    const int steps = atoi(argv[3]);
    const double beta1 = atof(argv[4]), beta2 = atof(argv[5]), eps = atof(argv[6]), wd = atof(argv[7]);
    const double rho = atof(argv[8]), momentum = atof(argv[9]), clip = atof(argv[10]);

    hs_params params = {0};
    int n_tensors = 0;
    size_t n = 0;
    for (char *tok = strtok(argv[2], ","); tok; tok = strtok(NULL, ",")) {
        char tname[32];
        snprintf(tname, sizeof tname, "t%d", n_tensors);
        int64_t shape[1] = {atoll(tok)};
        n_tensors++;
        n += (size_t)shape[0];
        hs_params_declare(&params, tname, 1, shape, 1);
    }
    params.tensors[n_tensors - 1].weight_decay = 0; /* the "bias" */
    hs_params_allocate(&params, hs_backend_cpu());

    FILE *in = fopen(argv[11], "rb");
    if (!in) {
        perror(argv[11]);
        return 2;
    }
    double *lrs;
    HS_ALLOC(lrs, steps);
    float *host;
    HS_ALLOC(host, n);
    read_exact(in, lrs, (size_t)steps * sizeof(double));
    read_exact(in, host, n * sizeof(float));
    upload_packed(&params, params.data, host);

    hs_optimizer *opt = hs_optimizer_create_named(name, &params, beta1, beta2, eps, wd, rho, momentum);
    padding_pass(&params, params.data, 0);
    padding_pass(&params, params.grad, 0);
    for (int k = 0; k < opt->n_states; k++) padding_pass(&params, opt->state[k], 0);
    FILE *out = fopen(argv[12], "wb");
    if (!out) {
        perror(argv[12]);
        return 2;
    }
    for (int s = 0; s < steps; s++) {
        read_exact(in, host, n * sizeof(float));
        upload_packed(&params, params.grad, host);
        const double norm = hs_clip_grad_norm(&params, clip);
        write_exact(out, &norm, sizeof norm);
        download_packed(&params, host, params.grad);
        write_exact(out, host, n * sizeof(float));
        hs_optimizer_step(opt, lrs[s]);
        download_packed(&params, host, params.data);
        write_exact(out, host, n * sizeof(float));
    }
    for (int k = 0; k < opt->n_states; k++) {
        download_packed(&params, host, opt->state[k]);
        write_exact(out, host, n * sizeof(float));
    }
    fclose(in);
    if (fclose(out) != 0) {
        perror("optim_driver: close");
        return 2;
    }

    size_t bad = padding_pass(&params, params.data, 1) + padding_pass(&params, params.grad, 1);
    for (int k = 0; k < opt->n_states; k++) bad += padding_pass(&params, opt->state[k], 1);
    if (opt->step != steps) {
        fprintf(stderr, "optim_driver: optimizer counted %lld steps, expected %d\n", (long long)opt->step, steps);
        return 1;
    }
    hs_optimizer_free(opt);
    hs_params_free(&params);
    free(lrs);
    free(host);
    if (bad) {
        fprintf(stderr, "optim_driver: %zu padding values between tensors were overwritten\n", bad);
        return 1;
    }
    return 0;
}
