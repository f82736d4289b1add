/* Winograd F(4×4,3×3) convolutions on the CPU (cpu_winograd.c), for 3×3 kernels with >= 8 input and
 * output channels: same contracts as the conv2d_* members of the backend; cpu_conv.c dispatches here
 * when hs_cpu_winograd_applies. */
#ifndef HS_BACKEND_CPU_CPU_WINOGRAD_H
#define HS_BACKEND_CPU_CPU_WINOGRAD_H

#include <stddef.h>

#include "backend/backend.h"

int hs_cpu_winograd_applies(const hs_conv2d_shape *s);
size_t hs_cpu_winograd_workspace_bytes(const hs_conv2d_shape *s);
void hs_cpu_winograd_forward(const hs_conv2d_shape *s, float *y, const float *x, const float *w, const float *b,
                             void *workspace);
void hs_cpu_winograd_backward(const hs_conv2d_shape *s, float *dx, float *dw, float *db, const float *dy,
                              const float *x, const float *w, void *workspace);

#endif
