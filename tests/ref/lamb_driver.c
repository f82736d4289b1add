/* Runs LAMB or AdamW steps on a BERT-like parameter table (CPU backend) for
 * tests/ref/test_lamb_vs_torch.py, calling the optimizer the way the trainer does.
 *
 *   lamb_driver NAME STEPS BETA1 BETA2 EPS WD CLIP TRUST_ALL TENSORS IN OUT
 *
 * TENSORS is a comma list of name:numel:decay (decay 1 = weight decay applies). CLIP is lamb's
 * max_grad_norm, or for other optimizers the clip_norm of hs_clip_grad_norm (<= 0: none). TRUST_ALL is
 * lamb's trust_ratio_on_no_decay. IN holds, packed without padding (N = sum of numel):
 *   float64 lr[STEPS], float32 p0[N], float32 grad[STEPS][N]
 * For each step the driver uploads the gradient and
 *   - if the optimizer clips internally: norm = hs_grad_norm, then on odd steps
 *     hs_optimizer_step_with_grad_norm(norm) and on even steps hs_optimizer_step (its own norm);
 *   - else: norm = hs_clip_grad_norm(CLIP), then hs_optimizer_step;
 * and writes to OUT:  float64 norm, float32 params[N], float32 state[k][N] for each state buffer.
 * Exit 1 if an update wrote into the padding between tensors, or if an optimizer that clips internally
 * changed the gradients (they must stay as the all-reduce left them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/params.h"
#include "optim/optimizer.h"
#include "util/check.h"

#include "driver_util.h"

const char driver_name[] = "lamb_driver";

int main(int argc, char **argv) {
    if (argc != 12) {
        fprintf(stderr, "usage: %s NAME STEPS BETA1 BETA2 EPS WD CLIP TRUST_ALL TENSORS IN OUT\n", argv[0]);
        return 2;
    }
    const char *name = argv[1];
    const int steps = atoi(argv[2]);
    const double beta1 = atof(argv[3]), beta2 = atof(argv[4]), eps = atof(argv[5]), wd = atof(argv[6]);
    const double clip = atof(argv[7]);
    const int trust_all = atoi(argv[8]);

    hs_params params = {0};
    size_t n = 0;
    for (char *tok = strtok(argv[9], ","); tok; tok = strtok(NULL, ",")) {
        char tname[HS_NAME_MAX];
        long long numel;
        int decay;
        if (sscanf(tok, "%127[^:]:%lld:%d", tname, &numel, &decay) != 3) {
            fprintf(stderr, "lamb_driver: bad tensor spec '%s' (want name:numel:decay)\n", tok);
            return 2;
        }
        int64_t shape[1] = {numel};
        hs_params_declare(&params, tname, 1, shape, decay);
        n += (size_t)numel;
    }
    hs_params_allocate(&params, hs_backend_cpu());

    FILE *in = driver_open(argv[10], "rb");
    float *host, *grad_in;
    HS_ALLOC(host, n);
    HS_ALLOC(grad_in, n);
    double *lrs = driver_read_lrs_and_params(in, steps, &params, host, n);

    hs_optimizer *opt = hs_optimizer_create_named(name, &params, beta1, beta2, eps, wd, 0.0, 0.0);
    opt->max_grad_norm = clip;
    opt->trust_ratio_on_no_decay = trust_all;
    const int internal = hs_optimizer_clips_internally(opt);
    FILE *out = driver_open(argv[11], "wb");
    size_t grads_changed = 0;
    for (int s = 0; s < steps; s++) {
        driver_read(in, grad_in, n * sizeof(float));
        driver_upload_packed(&params, params.grad, grad_in);
        double norm;
        if (internal) {
            norm = hs_grad_norm(&params);
            if (s % 2 == 0) hs_optimizer_step_with_grad_norm(opt, lrs[s], norm);
            else hs_optimizer_step(opt, lrs[s]);
            driver_download_packed(&params, host, params.grad);
            grads_changed += memcmp(host, grad_in, n * sizeof(float)) != 0;
        } else {
            norm = hs_clip_grad_norm(&params, clip);
            hs_optimizer_step(opt, lrs[s]);
        }
        driver_write(out, &norm, sizeof norm);
        driver_write_packed(out, &params, host, params.data, n);
        for (int k = 0; k < opt->n_states; k++) {
            driver_write_packed(out, &params, host, opt->state[k], n);
        }
    }
    fclose(in);
    driver_close_output(out);

    /* all buffers are allocated zero-filled, and no update may write outside its tensor */
    size_t bad = driver_padding_changed(&params, params.data, 0.0f) +
                 driver_padding_changed(&params, params.grad, 0.0f);
    for (int k = 0; k < opt->n_states; k++) bad += driver_padding_changed(&params, opt->state[k], 0.0f);
    int status = 0;
    if (opt->step != steps) {
        fprintf(stderr, "lamb_driver: optimizer counted %lld steps, expected %d\n", (long long)opt->step, steps);
        status = 1;
    }
    if (bad) {
        fprintf(stderr, "lamb_driver: %zu padding values between tensors were overwritten\n", bad);
        status = 1;
    }
    if (grads_changed) {
        fprintf(stderr, "lamb_driver: %s clips internally but changed the gradients in %zu step(s)\n", name,
                grads_changed);
        status = 1;
    }
    hs_optimizer_free(opt);
    hs_params_free(&params);
    free(lrs);
    free(host);
    free(grad_in);
    return status;
}
