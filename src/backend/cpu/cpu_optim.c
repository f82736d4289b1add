/* Optimizer updates on the CPU: one OpenMP loop per tensor over the shared per-element formulas of
 * kernels/math/optim_math.h. Elements are independent, so the result does not depend on the number
 * of threads. */
#include "backend/cpu/cpu_ops.h"
#include "math/optim_math.h"

/* Below this many elements a parallel region costs more than it saves. */
#define HS_OPTIM_PARALLEL_MIN 16384

void hs_cpu_adam_update(float *p, const float *g, float *m, float *v, size_t n, const hs_adam_hparams *h) {
    /* p[n], g[n], m[n] (exp_avg), v[n] (exp_avg_sq) */
    const hs_adam_coefs c =
        hs_adam_make_coefs(h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, h->step, h->decoupled);
    const long long count = (long long)n;
#pragma omp parallel for schedule(static) if (count >= HS_OPTIM_PARALLEL_MIN)
    for (long long i = 0; i < count; i++) hs_adam_elem(&p[i], g[i], &m[i], &v[i], &c);
}

void hs_cpu_adadelta_update(float *p, const float *g, float *sq, float *acc, size_t n, double lr, double rho,
                            double eps, double weight_decay) {
    /* p[n], g[n], sq[n] (square_avg), acc[n] (acc_delta) */
    const hs_adadelta_coefs c = hs_adadelta_make_coefs(lr, rho, eps, weight_decay);
    const long long count = (long long)n;
#pragma omp parallel for schedule(static) if (count >= HS_OPTIM_PARALLEL_MIN)
    for (long long i = 0; i < count; i++) hs_adadelta_elem(&p[i], g[i], &sq[i], &acc[i], &c);
}

void hs_cpu_sgd_update(float *p, const float *g, float *buf, size_t n, double lr, double momentum,
                       double weight_decay, int first_step) {
    /* p[n], g[n], buf[n] (momentum_buffer) or NULL */
    const float lr_f = (float)lr, momentum_f = (float)momentum, weight_decay_f = (float)weight_decay;
    const long long count = (long long)n;
#pragma omp parallel for schedule(static) if (count >= HS_OPTIM_PARALLEL_MIN)
    for (long long i = 0; i < count; i++)
        hs_sgd_elem(&p[i], g[i], buf ? &buf[i] : NULL, lr_f, momentum_f, weight_decay_f, first_step);
}
