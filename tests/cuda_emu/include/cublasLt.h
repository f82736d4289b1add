/* Stand-in for cuBLASLt (cublasLt.h) on the emulated device (tests only; tests/cuda_emu/).
 * Follows NVIDIA's cuBLAS documentation, chapter "Using the cuBLASLt API" (cublasLtCreate,
 * cublasLtMatmul, cublasLtMatmulAlgoGetHeuristic, the descriptor attributes and their types), and
 * chapter "Using the cuBLAS API" for cublasStatus_t, cublasOperation_t and cublasComputeType_t, with
 * NVIDIA's names, signatures and numeric values so host glue compiles unchanged (C and C++).
 * Only the fp32 GEMM hetseq uses is computed: CUDA_R_32F matrices, CUBLAS_COMPUTE_32F, scale type
 * CUDA_R_32F, column order, host alpha/beta; the epilogues DEFAULT, BIAS, RELU(_BIAS), GELU(_BIAS).
 * Anything else that NVIDIA's library accepts is CUBLAS_STATUS_NOT_SUPPORTED here, and what it rejects
 * gets its documented status. cublasLtMatmul is queued on the stream as one work item: nothing is
 * computed at the call. Behaviour: docs/gpu-emulation.md, "Library stand-ins". */
#ifndef HS_EMU_CUBLASLT_H
#define HS_EMU_CUBLASLT_H
#include <stddef.h>
#include <stdint.h>
#include "cuda_runtime_api.h"
#include "library_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- from cublas_api.h ("cuBLAS Datatypes Reference") ---------------------------------------- */
typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum { CUBLAS_POINTER_MODE_HOST = 0, CUBLAS_POINTER_MODE_DEVICE = 1 } cublasPointerMode_t;

typedef enum {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_16F_PEDANTIC = 65,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_PEDANTIC = 69,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_64F_PEDANTIC = 71,
  CUBLAS_COMPUTE_32I = 72,
  CUBLAS_COMPUTE_32I_PEDANTIC = 73
} cublasComputeType_t;

/* ---- cuBLASLt ("cuBLASLt Datatypes Reference") ------------------------------------------------ */
typedef struct cublasLtContext *cublasLtHandle_t;

/* Semi-opaque descriptors, the sizes of NVIDIA's. */
typedef struct { uint64_t data[8]; } cublasLtMatrixLayoutOpaque_t;
typedef cublasLtMatrixLayoutOpaque_t *cublasLtMatrixLayout_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulAlgo_t;
typedef struct { uint64_t data[32]; } cublasLtMatmulDescOpaque_t;
typedef cublasLtMatmulDescOpaque_t *cublasLtMatmulDesc_t;
typedef struct { uint64_t data[8]; } cublasLtMatmulPreferenceOpaque_t;
typedef cublasLtMatmulPreferenceOpaque_t *cublasLtMatmulPreference_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;

typedef enum {
  CUBLASLT_POINTER_MODE_HOST = CUBLAS_POINTER_MODE_HOST,
  CUBLASLT_POINTER_MODE_DEVICE = CUBLAS_POINTER_MODE_DEVICE,
  CUBLASLT_POINTER_MODE_DEVICE_VECTOR = 2,
  CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO = 3,
  CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST = 4
} cublasLtPointerMode_t;

/* Matrix layout attributes (type of the value in parentheses, as documented). */
typedef enum {
  CUBLASLT_MATRIX_LAYOUT_TYPE = 0,                 /* uint32_t (cudaDataType) */
  CUBLASLT_MATRIX_LAYOUT_ORDER = 1,                /* int32_t (cublasLtOrder_t), default COL */
  CUBLASLT_MATRIX_LAYOUT_ROWS = 2,                 /* uint64_t */
  CUBLASLT_MATRIX_LAYOUT_COLS = 3,                 /* uint64_t */
  CUBLASLT_MATRIX_LAYOUT_LD = 4,                   /* int64_t */
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,          /* int32_t, default 1 */
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6, /* int64_t (elements), default 0 */
  CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET = 7,         /* int64_t */
  CUBLASLT_MATRIX_LAYOUT_BATCH_MODE = 8            /* uint32_t */
} cublasLtMatrixLayoutAttribute_t;

/* Matmul descriptor attributes (the subset hetseq may set, with NVIDIA's values). */
typedef enum {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,      /* int32_t (cublasComputeType_t) */
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,        /* int32_t (cudaDataType) */
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,      /* int32_t (cublasLtPointerMode_t), default HOST */
  CUBLASLT_MATMUL_DESC_TRANSA = 3,            /* int32_t (cublasOperation_t), default CUBLAS_OP_N */
  CUBLASLT_MATMUL_DESC_TRANSB = 4,            /* int32_t (cublasOperation_t), default CUBLAS_OP_N */
  CUBLASLT_MATMUL_DESC_TRANSC = 5,            /* int32_t, only CUBLAS_OP_N */
  CUBLASLT_MATMUL_DESC_FILL_MODE = 6,         /* int32_t */
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,          /* uint32_t (cublasLtEpilogue_t), default DEFAULT */
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,      /* const void * (device), default NULL */
  CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10, /* int64_t (elements), default 0 */
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26    /* int32_t (cudaDataType) */
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_RELU_AUX = 2 | 128,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = 2 | 4,
  CUBLASLT_EPILOGUE_RELU_AUX_BIAS = 2 | 128 | 4,
  CUBLASLT_EPILOGUE_DRELU = 8 | 128,
  CUBLASLT_EPILOGUE_DRELU_BGRAD = 8 | 128 | 16,
  CUBLASLT_EPILOGUE_GELU = 32,
  CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
  CUBLASLT_EPILOGUE_GELU_BIAS = 32 | 4,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
  CUBLASLT_EPILOGUE_DGELU = 64 | 128,
  CUBLASLT_EPILOGUE_DGELU_BGRAD = 64 | 128 | 16,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;

typedef enum { CUBLASLT_SEARCH_BEST_FIT = 0, CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID = 1 } cublasLtMatmulSearch_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,          /* uint32_t, default BEST_FIT */
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  /* uint64_t, default 0: no workspace */
  CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;  /* the workspace this algorithm needs */
  cublasStatus_t state;  /* the other fields are valid only when CUBLAS_STATUS_SUCCESS */
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
const char *cublasLtGetStatusName(cublasStatus_t status);
const char *cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspaceSizeInBytes,
                              cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
