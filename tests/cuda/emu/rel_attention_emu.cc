// kernels/rel_attention.cu compiled with the host C++ compiler for the emulated CUDA device (tests/cuda.am).
#include "rel_attention.cu"
