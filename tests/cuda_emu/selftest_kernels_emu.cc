// The self-test kernels compiled for the emulated CUDA device (the same source nvcc compiles).
#include "selftest_kernels.cu"
