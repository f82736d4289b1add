// kernels/activations.cu compiled with the host C++ compiler for the emulated CUDA device (tests/cuda.am).
#include "activations.cu"
