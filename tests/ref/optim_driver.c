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

#include "driver_util.h"

#define MAX_TENSORS 16

const char driver_name[] = "optim_driver";

/* The padding floats between tensors (and after the last) get a sentinel before the run; an update
 * that wrote outside a tensor's range would change one. */
#define PADDING_SENTINEL 7.0f

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

    FILE *in = driver_open(argv[11], "rb");
    float *host;
    HS_ALLOC(host, n);
    double *lrs = driver_read_lrs_and_params(in, steps, &params, host, n);

    hs_optimizer *opt = hs_optimizer_create_named(name, &params, beta1, beta2, eps, wd, rho, momentum);
    driver_fill_padding(&params, params.data, PADDING_SENTINEL);
    driver_fill_padding(&params, params.grad, PADDING_SENTINEL);
    for (int k = 0; k < opt->n_states; k++) driver_fill_padding(&params, opt->state[k], PADDING_SENTINEL);
    FILE *out = driver_open(argv[12], "wb");
    for (int s = 0; s < steps; s++) {
        driver_read(in, host, n * sizeof(float));
        driver_upload_packed(&params, params.grad, host);
        const double norm = hs_clip_grad_norm(&params, clip);
        driver_write(out, &norm, sizeof norm);
        driver_write_packed(out, &params, host, params.grad, n);
        hs_optimizer_step(opt, lrs[s]);
        driver_write_packed(out, &params, host, params.data, n);
    }
    for (int k = 0; k < opt->n_states; k++) driver_write_packed(out, &params, host, opt->state[k], n);
    fclose(in);
    driver_close_output(out);

    size_t bad = driver_padding_changed(&params, params.data, PADDING_SENTINEL) +
                 driver_padding_changed(&params, params.grad, PADDING_SENTINEL);
    for (int k = 0; k < opt->n_states; k++) bad += driver_padding_changed(&params, opt->state[k], PADDING_SENTINEL);
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
