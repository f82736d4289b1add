/* The finite-difference gradient checker shared by the layer tests (test_grad_layers.c,
 * test_grad_bert_layers.c).
 *
 * For a layer y = f(x, θ) a test takes a fixed random projection L = Σ r ⊙ y (accumulated in double),
 * feeds dy = r to the backward pass, and compares each analytic ∂L/∂v with (L(v+ε) - L(v-ε)) divided
 * by the step actually taken in float32 (not 2ε). Accepted:
 *   |analytic - numeric| ≤ 2e-3·max(|a|,|n|) + 2e-4·max(1, largest |analytic| of the tensor).
 * The tests' own comments explain why that bound is about 10x the float32 noise for their cases. */
#ifndef HS_TESTS_FD_CHECK_H
#define HS_TESTS_FD_CHECK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "math/hs_math.h"

/* v[n] ~ U(lo, hi), reproducible from the counter-RNG `key` */
static inline void fd_fill_uniform(float *v, size_t n, float lo, float hi, uint64_t key) {
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * hs_uniform(key, 0, i);
}

/* L = Σ r ⊙ y in double */
static inline double fd_project(const float *y, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)r[i] * (double)y[i];
    return s;
}

/* What the checker perturbs and how it recomputes the scalar loss. */
typedef struct fd_case {
    double (*loss)(void *state); /* forward, then the scalar */
    void *state;
    float eps;
} fd_case;

/* Compares analytic[count] with central differences of c->loss w.r.t. every coordinate of
 * value[count] (restored afterwards). Returns the number of mismatches and prints the first few. */
static inline int fd_check_gradient(const char *what, const fd_case *c, float *value, const float *analytic,
                                    size_t count) {
    float grad_scale = 1.0f;
    for (size_t i = 0; i < count; i++) grad_scale = fmaxf(grad_scale, fabsf(analytic[i]));
    const double atol = 2e-4 * grad_scale, rtol = 2e-3;
    int bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        const float v = value[i];
        const float up = v + c->eps, down = v - c->eps;
        value[i] = up;
        const double loss_up = c->loss(c->state);
        value[i] = down;
        const double loss_down = c->loss(c->state);
        value[i] = v;
        const double numeric = (loss_up - loss_down) / ((double)up - (double)down);
        const double a = analytic[i], err = fabs(a - numeric);
        const double allowed = rtol * fmax(fabs(a), fabs(numeric)) + atol;
        if (err / allowed > worst) worst = err / allowed;
        if (err > allowed) {
            if (bad < 5) fprintf(stderr, "  %s[%zu]: analytic %.6g numeric %.6g\n", what, i, a, numeric);
            bad++;
        }
    }
    fprintf(stderr, "  %-26s %5zu values checked, worst error/allowed %.3f%s\n", what, count, worst,
            bad ? "  FAILED" : "");
    return bad;
}

#endif
