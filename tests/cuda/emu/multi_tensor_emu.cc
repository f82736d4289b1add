// kernels/multi_tensor.cu compiled with the host C++ compiler for the emulated CUDA device (tests/cuda.am).
#include "multi_tensor.cu"
