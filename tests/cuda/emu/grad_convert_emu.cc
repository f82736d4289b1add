// kernels/grad_convert.cu compiled with the host C++ compiler for the emulated CUDA device (tests/grad_buckets.am).
#include "grad_convert.cu"
