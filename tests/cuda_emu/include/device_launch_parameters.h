/* Stand-in for CUDA's device_launch_parameters.h on the emulated device (tests only):
 * threadIdx, blockIdx, blockDim, gridDim and warpSize, per emulated thread (see hs_emu/device_builtins.h). */
#ifndef HS_EMU_DEVICE_LAUNCH_PARAMETERS_H
#define HS_EMU_DEVICE_LAUNCH_PARAMETERS_H
#include "hs_emu/device_builtins.h"
#endif
