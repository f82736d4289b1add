/* Stand-in for CUDA's library_types.h on the emulated device (tests only; tests/cuda_emu/).
 * The data-type enum the CUDA math libraries take (cuBLAS / cuBLASLt: "cudaDataType_t"), with the
 * numeric values of CUDA 13's, so a logged code means the same as on a GPU. Only the real-valued types
 * are declared; the library stand-ins compute with CUDA_R_32F alone (docs/gpu-emulation.md, "Library
 * stand-ins") and answer CUBLAS_STATUS_NOT_SUPPORTED for the others. */
#ifndef HS_EMU_LIBRARY_TYPES_H
#define HS_EMU_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
  CUDA_R_16F = 2,   /* half */
  CUDA_R_16BF = 14, /* bfloat16 */
  CUDA_R_32F = 0,   /* float */
  CUDA_R_64F = 1,   /* double */
  CUDA_R_8I = 3,
  CUDA_R_8U = 8,
  CUDA_R_32I = 10,
  CUDA_R_32U = 12,
  CUDA_R_64I = 24,
  CUDA_R_64U = 26
} cudaDataType;
typedef enum cudaDataType_t cudaDataType_t;

#endif
