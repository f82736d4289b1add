/* Per-element optimizer updates, written once for the CPU backend and the CUDA kernels (HS_HD).
 * Coefficients that depend only on hyper-parameters and the step (1-beta, lr·wd, the bias-corrected
 * step size) are computed once per call in double on the host by hs_*_coefs and rounded to float,
 * exactly as PyTorch rounds a Python-float scalar when it calls an fp32 kernel. The element math is
 * float32, in PyTorch's operation order, so results agree with torch.optim to a few ulps. */
#ifndef HS_KERNELS_OPTIM_MATH_H
#define HS_KERNELS_OPTIM_MATH_H

#include <math.h>
#include <stdint.h>

#include "math/hs_math.h"

/* ---- Adam (HetSeq / fairseq, decoupled weight decay) ------------------------------------------
 *   m = b1·m + (1-b1)·g            v = b2·v + (1-b2)·g²
 *   p = p - (wd·lr)·p              (decoupled decay, on the parameter before the step)
 *   p = p - step_size · m / (sqrt(v) + eps),   step_size = lr·sqrt(1-b2^t)/(1-b1^t)
 * eps is added to the uncorrected sqrt(v) (fairseq's choice). PyTorch's AdamW adds eps to
 * sqrt(v)/sqrt(1-b2^t) instead: the same update with eps·sqrt(1-b2^t) in place of eps.
 * l2 != 0 gives classic coupled L2 decay (g += l2·p) instead of decay. */
typedef struct hs_adam_coefs {
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
    float step_size; /* lr·sqrt(1-b2^t)/(1-b1^t) */
    float decay;     /* wd·lr when decoupled, else 0 */
    float l2;        /* wd when coupled, else 0 */
} hs_adam_coefs;

HS_HD static inline hs_adam_coefs hs_adam_make_coefs(double lr, double beta1, double beta2, double eps,
                                                     double weight_decay, int64_t t, int decoupled) {
    hs_adam_coefs c;
    double bias_correction1 = 1.0 - pow(beta1, (double)t);
    double bias_correction2 = 1.0 - pow(beta2, (double)t);
    c.beta1 = (float)beta1;
    c.one_minus_beta1 = (float)(1.0 - beta1);
    c.beta2 = (float)beta2;
    c.one_minus_beta2 = (float)(1.0 - beta2);
    c.eps = (float)eps;
    c.step_size = (float)(lr * sqrt(bias_correction2) / bias_correction1);
    c.decay = decoupled ? (float)(weight_decay * lr) : 0.0f;
    c.l2 = decoupled ? 0.0f : (float)weight_decay;
    return c;
}

HS_HD static inline void hs_adam_elem(float *p, float g, float *m, float *v, const hs_adam_coefs *c) {
    float theta = *p;
    g = g + c->l2 * theta;
    float m_t = *m * c->beta1 + c->one_minus_beta1 * g;
    float v_t = *v * c->beta2 + c->one_minus_beta2 * g * g;
    float denom = sqrtf(v_t) + c->eps;
    theta = theta - c->decay * theta;
    theta = theta - c->step_size * m_t / denom;
    *m = m_t;
    *v = v_t;
    *p = theta;
}

/* ---- Adadelta (torch 1.6 .. 1.13) -----------------------------------------------------------
 *   g = g + wd·p
 *   sq = rho·sq + (1-rho)·g²
 *   delta = sqrt(acc + eps) / sqrt(sq + eps) · g
 *   p = p - lr·delta
 *   acc = rho·acc + (1-rho)·delta² */
typedef struct hs_adadelta_coefs {
    float lr, rho, one_minus_rho, eps, weight_decay;
} hs_adadelta_coefs;

HS_HD static inline hs_adadelta_coefs hs_adadelta_make_coefs(double lr, double rho, double eps, double weight_decay) {
    hs_adadelta_coefs c;
    c.lr = (float)lr;
    c.rho = (float)rho;
    c.one_minus_rho = (float)(1.0 - rho);
    c.eps = (float)eps;
    c.weight_decay = (float)weight_decay;
    return c;
}

HS_HD static inline void hs_adadelta_elem(float *p, float g, float *sq, float *acc, const hs_adadelta_coefs *c) {
    float theta = *p;
    g = g + c->weight_decay * theta;
    float sq_t = *sq * c->rho + c->one_minus_rho * g * g;
    float std = sqrtf(sq_t + c->eps);
    float delta = sqrtf(*acc + c->eps) / std * g;
    *acc = *acc * c->rho + c->one_minus_rho * delta * delta;
    *sq = sq_t;
    *p = theta - c->lr * delta;
}

/* ---- SGD with momentum (torch.optim.SGD: dampening 0, no Nesterov) ----------------------------
 *   d = g + wd·p
 *   buf = d (first step) | momentum·buf + d      (only when a buffer is kept, i.e. momentum != 0)
 *   p = p - lr·buf */
HS_HD static inline void hs_sgd_elem(float *p, float g, float *buf, float lr, float momentum, float weight_decay,
                                     int first_step) {
    float theta = *p;
    float d = g + weight_decay * theta;
    if (buf) {
        d = first_step ? d : *buf * momentum + d;
        *buf = d;
    }
    *p = theta - lr * d;
}

/* ---- LAMB (NVLAMB as apex FusedLAMB runs it: adam_w_mode, grad_averaging, bias_correction) -----
 * Stage 1 per element, with d the global clipping divisor (norm/max_norm when the global gradient
 * norm exceeds max_norm, else 1):
 *   g' = g / d;   m = b1·m + (1-b1)·g';   v = b2·v + (1-b2)·g'²
 *   u  = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)  [+ wd·p when the tensor's wd != 0]
 * Stage 2 per element, with the tensor's step s = lr·||p||/||u|| (or lr, see optimizer.c):
 *   p = p - s·u
 * u is a pure function of (p, m, v) after stage 1, so stage 2 recomputes it with the same float
 * operations instead of storing it: bit-identical to stage 1, and no params-sized scratch buffer. */
typedef struct hs_lamb_coefs {
    float beta1, one_minus_beta1, beta2, one_minus_beta2;
    float bias_correction1, bias_correction2; /* 1-b1^t, 1-b2^t */
    float eps, weight_decay, grad_divisor;
} hs_lamb_coefs;

HS_HD static inline hs_lamb_coefs hs_lamb_make_coefs(double beta1, double beta2, double eps, double weight_decay,
                                                     double grad_divisor, int64_t t) {
    hs_lamb_coefs c;
    c.beta1 = (float)beta1;
    c.one_minus_beta1 = (float)(1.0 - beta1);
    c.beta2 = (float)beta2;
    c.one_minus_beta2 = (float)(1.0 - beta2);
    c.bias_correction1 = (float)(1.0 - pow(beta1, (double)t));
    c.bias_correction2 = (float)(1.0 - pow(beta2, (double)t));
    c.eps = (float)eps;
    c.weight_decay = (float)weight_decay;
    c.grad_divisor = (float)grad_divisor;
    return c;
}

/* u from the parameter and the updated moments (both stages call this). */
HS_HD static inline float hs_lamb_direction(float p, float m, float v, const hs_lamb_coefs *c) {
    float m_unbiased = m / c->bias_correction1;
    float v_unbiased = v / c->bias_correction2;
    /* apex reads p only when wd != 0 (else it uses 0): u + wd·p, or u + 0·0. A select, not a branch,
     * so the loops vectorize. */
    float p_decayed = c->weight_decay != 0.0f ? p : 0.0f;
    return m_unbiased / (sqrtf(v_unbiased) + c->eps) + c->weight_decay * p_decayed;
}

/* Stage 1: update m, v in place; returns u. */
HS_HD static inline float hs_lamb_moments_elem(float p, float g, float *m, float *v, const hs_lamb_coefs *c) {
    float g_clipped = g / c->grad_divisor;
    float m_t = *m * c->beta1 + c->one_minus_beta1 * g_clipped;
    float v_t = *v * c->beta2 + c->one_minus_beta2 * g_clipped * g_clipped;
    *m = m_t;
    *v = v_t;
    return hs_lamb_direction(p, m_t, v_t, c);
}

/* Stage 2: p -= step·u. */
HS_HD static inline void hs_lamb_apply_elem(float *p, float m, float v, float step, const hs_lamb_coefs *c) {
    float theta = *p;
    *p = theta - step * hs_lamb_direction(theta, m, v, c);
}

/* The step of one tensor from its Σ p² and Σ u² (double, before the update): lr·||p||/||u|| when the
 * tensor takes the trust ratio and both norms are non-zero, else lr. */
HS_HD static inline double hs_lamb_step(double lr, double p_sumsq, double u_sumsq, int trusted) {
    const double p_norm = sqrt(p_sumsq), u_norm = sqrt(u_sumsq);
    return trusted && p_norm != 0.0 && u_norm != 0.0 ? lr * (p_norm / u_norm) : lr;
}

#endif
