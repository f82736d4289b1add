// The library stand-ins of the emulated CUDA device (tests/cuda_emu/include/cublasLt.h, cudnn.h,
// nccl.h) compute what NVIDIA documents, against naive host loops, return the documented statuses for
// bad arguments, and run their work only when the stream does:
//   - cuBLASLt: every transpose combination, sizes 1, 31, 33, 127, leading dimensions above the row
//     count, strided batches, beta = 0 over a NaN-filled C, in-place C == D, the bias / ReLU / GELU
//     epilogues, the heuristic's workspace; CUDA_R_16BF and CUDA_R_16F A and B with fp32 C and D (and with
//     C and D of their type, the bias epilogue's vector of D's type, rounded once), and
//     CUBLAS_COMPUTE_32F_FAST_TF32 (inputs rounded to TF32), each against a reference of the rounded
//     inputs that the other interpretation (the other 16-bit type, unrounded fp32) fails; the type
//     combinations cuBLASLt's table does not list are NOT_SUPPORTED; the summation order of a GPU (a
//     check expecting a CPU loop's bits fails, other seeds give other bits) and TF32 ties to even;
//   - cuDNN: forward, backward data, backward filter and backward bias convolutions with padding,
//     strides, dilation, both modes, each algorithm the heuristics offer, and cudnnAddTensor, under
//     CUDNN_FMA_MATH (fp32); the other math types round the inputs to TF32 (compute capability 8.0);
//   - NCCL on one rank: all-reduce and broadcast, the communicator calls, a mismatched id, an aborted
//     communicator, and the missing event between a compute stream and the NCCL stream (caught: wrong
//     under some seed; with the event right under all).
// Run with --ranks under `mpirun -n 3` (test_emu_nccl.sh) it checks NCCL across ranks instead,
// including a rank that makes its own ncclUniqueId.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <cublasLt.h>
#include <cudnn.h>
#include <nccl.h>
#include <cstdint>
#include <vector>
#include "hs_emu/control.h"
#include "selftest.h"
#include "selftest_kernels.h"

#define LT_EXPECT(call, expected)                                                                          \
  do {                                                                                                     \
    const cublasStatus_t s_ = (call);                                                                      \
    if (s_ != (expected)) {                                                                                \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call,                   \
              cublasLtGetStatusName(s_), cublasLtGetStatusName(expected));                                 \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)
#define LT_OK(call) LT_EXPECT(call, CUBLAS_STATUS_SUCCESS)

#define DNN_EXPECT(call, expected)                                                                         \
  do {                                                                                                     \
    const cudnnStatus_t s_ = (call);                                                                       \
    if (s_ != (expected)) {                                                                                \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__, #call,                   \
              cudnnGetErrorString(s_), cudnnGetErrorString(expected));                                     \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)
#define DNN_OK(call) DNN_EXPECT(call, CUDNN_STATUS_SUCCESS)

#define NCCL_EXPECT(call, expected)                                                                        \
  do {                                                                                                     \
    const ncclResult_t r_ = (call);                                                                        \
    if (r_ != (expected)) {                                                                                \
      fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d; last error: %s\n", __FILE__, __LINE__,     \
              #call, static_cast<int>(r_), ncclGetErrorString(r_), static_cast<int>(expected),             \
              ncclGetLastError(nullptr));                                                                  \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)
#define NCCL_OK(call) NCCL_EXPECT(call, ncclSuccess)
#define FAILF(...)                   \
  do {                               \
    fprintf(stderr, "FAIL " __VA_ARGS__); \
    exit(1);                         \
  } while (0)

namespace {

constexpr int kSeeds = 8;

// deterministic values in [-1, 1)
struct Rng {
  uint64_t s;
  float next() {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((s >> 40) & 0xFFFF) / 32768.0f - 1.0f;
  }
};

std::vector<float> randoms(size_t n, uint64_t seed) {
  Rng r{seed};
  std::vector<float> v(n);
  for (float &x : v) x = r.next();
  return v;
}

float *device_floats(size_t n) {
  float *d = nullptr;
  CUDA_OK(cudaMalloc(&d, (n == 0 ? 1 : n) * sizeof(float)));
  return d;
}

float *upload(const std::vector<float> &h) {
  float *d = device_floats(h.size());
  CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

std::vector<float> download(const float *d, size_t n) {
  std::vector<float> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}

bool approx(float got, double want, double tol = 1e-4) {
  return std::fabs(static_cast<double>(got) - want) <= tol * (1.0 + std::fabs(want));
}

// ==== cuBLASLt ========================================================================================

struct Gemm {
  bool ta = false, tb = false;
  int m = 1, n = 1, k = 1;
  int pad_a = 0, pad_b = 0, pad_c = 0, pad_d = 0; // leading dimension = rows + pad
  int batch = 1;
  int64_t extra_stride = 0; // batch stride = matrix size + extra
  float alpha = 1.0f, beta = 0.0f;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool in_place = false; // C == D (same layout)
};

struct LtEnv {
  cublasLtHandle_t lt;
  cudaStream_t stream;
  void *workspace;
  size_t workspace_bytes;
};

cublasLtMatrixLayout_t make_layout(uint64_t rows, uint64_t cols, int64_t ld, int batch, int64_t stride) {
  cublasLtMatrixLayout_t l;
  LT_OK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld));
  const int32_t b = batch;
  LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
  LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  return l;
}

float gelu_ref(double x) { return static_cast<float>(0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))); }

// Runs one GEMM through the heuristic and cublasLtMatmul, checks it against a host loop.
void check_gemm(const LtEnv &env, const Gemm &g, uint64_t seed) {
  const int ar = g.ta ? g.k : g.m, ac = g.ta ? g.m : g.k;
  const int br = g.tb ? g.n : g.k, bc = g.tb ? g.k : g.n;
  const int64_t lda = ar + g.pad_a, ldb = br + g.pad_b, ldd = g.m + g.pad_d;
  const int64_t ldc = g.in_place ? ldd : g.m + g.pad_c;
  const int64_t sa = lda * ac + g.extra_stride, sb = ldb * bc + g.extra_stride;
  const int64_t sc = ldc * g.n + g.extra_stride, sd = g.in_place ? sc : ldd * g.n + g.extra_stride;
  const size_t na = static_cast<size_t>(sa * g.batch), nb = static_cast<size_t>(sb * g.batch);
  const size_t nc = static_cast<size_t>(sc * g.batch), nd = static_cast<size_t>(sd * g.batch);
  const std::vector<float> ha = randoms(na, seed), hb = randoms(nb, seed + 1), hc = randoms(nc, seed + 2);
  const bool bgrad_a = g.epilogue == CUBLASLT_EPILOGUE_BGRADA, bgrad_b = g.epilogue == CUBLASLT_EPILOGUE_BGRADB;
  const int blen = bgrad_b ? g.n : g.m; // BGRADB: one value per column of D; BIAS and BGRADA: per row
  const std::vector<float> hbias = randoms(static_cast<size_t>(blen * g.batch), seed + 3);
  const bool bias = (g.epilogue & CUBLASLT_EPILOGUE_BIAS) != 0;
  float *da = upload(ha), *db = upload(hb), *dbias = upload(hbias);
  // beta == 0: C stays NaN-filled (cudaMalloc's fill), which must not reach D
  float *dc = g.beta != 0.0f || g.in_place ? upload(hc) : device_floats(nc);
  if (g.in_place && g.beta == 0.0f) {
    CUDA_OK(cudaMemset(dc, 0xFF, nc * sizeof(float)));
    CUDA_OK(cudaDeviceSynchronize()); // the memset is on the legacy stream; env.stream is non-blocking
  }
  float *dd = g.in_place ? dc : device_floats(nd);

  cublasLtMatmulDesc_t desc;
  LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t opa = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g.epilogue, sizeof g.epilogue));
  if (bias || bgrad_a || bgrad_b) {
    const void *bp = dbias;
    const int64_t bstride = blen;
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
    LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bstride, sizeof bstride));
  }
  cublasLtMatrixLayout_t la = make_layout(ar, ac, lda, g.batch, sa), lb = make_layout(br, bc, ldb, g.batch, sb);
  cublasLtMatrixLayout_t lc = make_layout(g.m, g.n, ldc, g.batch, sc), ld = make_layout(g.m, g.n, ldd, g.batch, sd);
  cublasLtMatmulPreference_t pref;
  LT_OK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = env.workspace_bytes;
  LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
  cublasLtMatmulHeuristicResult_t res[4];
  int count = 0;
  LT_OK(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, lc, ld, pref, 4, res, &count));
  CHECK(count == 1 && res[0].state == CUBLAS_STATUS_SUCCESS && res[0].workspaceSize <= max_ws);
  LT_OK(cublasLtMatmul(env.lt, desc, &g.alpha, da, la, db, lb, &g.beta, dc, lc, dd, ld, &res[0].algo, env.workspace,
                       env.workspace_bytes, env.stream));
  CUDA_OK(cudaStreamSynchronize(env.stream));
  const std::vector<float> got = download(dd, nd);

  int bad = 0;
  if (bgrad_a || bgrad_b) { // the bias buffer now holds op(A) summed over k per row, or op(B) per column
    const std::vector<float> grad = download(dbias, hbias.size());
    for (int bi = 0; bi < g.batch; bi++)
      for (int i = 0; i < blen; i++) {
        double want = 0.0;
        for (int q = 0; q < g.k; q++)
          want += bgrad_a ? (g.ta ? ha[bi * sa + q + i * lda] : ha[bi * sa + i + q * lda])
                          : (g.tb ? hb[bi * sb + i + q * ldb] : hb[bi * sb + q + i * ldb]);
        const float v = grad[static_cast<size_t>(bi * blen + i)];
        if (!approx(v, want) && bad++ < 5)
          fprintf(stderr, "  batch %d bias gradient [%d] = %g, expected %g\n", bi, i, static_cast<double>(v), want);
      }
  }
  for (int bi = 0; bi < g.batch; bi++)
    for (int j = 0; j < g.n; j++)
      for (int i = 0; i < g.m; i++) {
        double acc = 0.0;
        for (int q = 0; q < g.k; q++) {
          const float a = g.ta ? ha[bi * sa + q + i * lda] : ha[bi * sa + i + q * lda];
          const float b = g.tb ? hb[bi * sb + j + q * ldb] : hb[bi * sb + q + j * ldb];
          acc += static_cast<double>(a) * b;
        }
        double v = g.alpha * acc;
        if (g.beta != 0.0f) v += g.beta * static_cast<double>(hc[bi * sc + i + j * ldc]);
        if (bias) v += hbias[bi * g.m + i];
        if (g.epilogue & CUBLASLT_EPILOGUE_RELU) v = v > 0.0 ? v : 0.0;
        if (g.epilogue & CUBLASLT_EPILOGUE_GELU) v = gelu_ref(v);
        const float d = got[bi * sd + i + j * ldd];
        if (!approx(d, v) && bad++ < 5)
          fprintf(stderr, "  batch %d D(%d,%d) = %g, expected %g\n", bi, i, j, static_cast<double>(d), v);
      }
  // rows past m (ld > rows) and the gaps between batches are not written
  if (!g.in_place)
    for (int bi = 0; bi < g.batch; bi++)
      for (int j = 0; j < g.n; j++)
        for (int64_t i = g.m; i < ldd; i++) bad += !std::isnan(got[bi * sd + i + j * ldd]);
  if (bad != 0) {
    fprintf(stderr, "FAIL cublasLtMatmul %s%s m=%d n=%d k=%d batch=%d beta=%g epilogue=%u: %d wrong\n", g.ta ? "T" : "N",
            g.tb ? "T" : "N", g.m, g.n, g.k, g.batch, static_cast<double>(g.beta), g.epilogue, bad);
    exit(1);
  }
  LT_OK(cublasLtMatmulPreferenceDestroy(pref));
  for (cublasLtMatrixLayout_t l : {la, lb, lc, ld}) LT_OK(cublasLtMatrixLayoutDestroy(l));
  LT_OK(cublasLtMatmulDescDestroy(desc));
  for (float *p : {da, db, dbias, dc}) CUDA_OK(cudaFree(p));
  if (!g.in_place) CUDA_OK(cudaFree(dd));
}

void cublaslt_results(const LtEnv &env) {
  const int sizes[][3] = {{1, 1, 1}, {31, 33, 127}, {33, 31, 1}, {127, 1, 33}, {1, 127, 31}, {33, 33, 33}};
  uint64_t seed = 100;
  int cases = 0;
  for (int t = 0; t < 4; t++)
    for (const auto &sz : sizes) {
      Gemm g;
      g.ta = t & 1;
      g.tb = (t >> 1) & 1;
      g.m = sz[0];
      g.n = sz[1];
      g.k = sz[2];
      g.pad_a = (t + 1) % 3;
      g.pad_b = t % 2 * 5;
      g.pad_d = t % 3;
      g.alpha = 1.25f;
      g.beta = t % 2 == 0 ? 0.0f : -0.5f;
      g.pad_c = 2;
      check_gemm(env, g, seed += 10);
      cases++;
    }
  printf("ok   cublasLtMatmul: N/T x N/T, sizes 1..127, ld > rows, beta 0 (NaN C) and -0.5: %d cases\n", cases);
  for (int t = 0; t < 4; t++) {
    Gemm g;
    g.ta = t & 1;
    g.tb = (t >> 1) & 1;
    g.m = 31;
    g.n = 17;
    g.k = 33;
    g.pad_a = 1;
    g.pad_d = 3;
    g.batch = 3;
    g.extra_stride = 7;
    g.beta = 0.75f;
    g.pad_c = 1;
    check_gemm(env, g, seed += 10);
    g.in_place = true;
    check_gemm(env, g, seed += 10);
    g.beta = 0.0f; // in place over NaN: C == D is not read
    check_gemm(env, g, seed += 10);
  }
  printf("ok   cublasLtMatmul: strided batches of 3 with gaps, in place (C == D) with beta 0.75 and 0\n");
  const uint32_t epilogues[] = {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_RELU_BIAS,
                                CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS};
  for (uint32_t e : epilogues) {
    Gemm g;
    g.tb = true;
    g.m = 33;
    g.n = 31;
    g.k = 127;
    g.batch = 2;
    g.epilogue = e;
    g.beta = e == CUBLASLT_EPILOGUE_GELU ? 0.5f : 0.0f;
    check_gemm(env, g, seed += 10);
  }
  printf("ok   cublasLtMatmul epilogues: BIAS, RELU, RELU_BIAS, GELU (tanh), GELU_BIAS, per-batch bias\n");
  // the bias gradients: every transpose, batches, alpha != 1 (not applied to the sums), beta != 0 (C kept)
  int grads = 0;
  for (uint32_t e : {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB})
    for (int t = 0; t < 4; t++) {
      Gemm g;
      g.ta = t & 1;
      g.tb = (t >> 1) & 1;
      g.m = 33;
      g.n = 17;
      g.k = 65;
      g.pad_a = 2;
      g.pad_b = 3;
      g.batch = t == 3 ? 2 : 1;
      g.alpha = 1.5f;
      g.beta = t % 2 ? 1.0f : 0.0f;
      g.pad_c = t % 2 ? 0 : 1;
      g.in_place = t % 2 != 0;
      g.epilogue = e;
      check_gemm(env, g, seed += 10);
      grads++;
    }
  printf("ok   cublasLtMatmul epilogues: BGRADA (op(A) summed over k per row of D), BGRADB (op(B) per column): "
         "%d cases\n", grads);
}

// ---- 16-bit inputs and TF32 compute ------------------------------------------------------------------
// The test's own conversions (bit patterns, independent of the stand-in's value-based ones).
float t_bf16(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}
float t_fp16(uint16_t h) { // sign, 5-bit exponent (bias 15), 10-bit fraction; no inf/NaN generated here
  const uint32_t e = (h >> 10) & 0x1f, f = h & 0x3ff;
  uint32_t u = static_cast<uint32_t>(h & 0x8000) << 16;
  if (e != 0) u |= ((e + 112) << 23) | (f << 13);
  float v;
  memcpy(&v, &u, sizeof v);
  if (e == 0) v = (h & 0x8000 ? -1.0f : 1.0f) * static_cast<float>(f) * 0x1p-24f; // subnormal
  return v;
}
float t_tf32(float x) { // nearest, ties to even, at bit 13 (finite x)
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  u += 0xfffu + ((u >> 13) & 1u);
  u &= ~0x1fffu;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}

enum class Lowp { Tf32, Bf16, Fp16 };

// D = alpha op(A) op(B) + beta C for a strided batch of 2, A and B of `kind`, checked against the double
// sum of the products of the inputs as the kind defines them; tolerance (k + 2) 2^-24 sum |products|
// (exact products, float sums). The same result checked against the other reading of the inputs (the
// other 16-bit type; the unrounded fp32 values for TF32) must fail, so a stand-in that read the wrong
// type or skipped the rounding does not pass.
void check_lowp_gemm(const LtEnv &env, Lowp kind, bool ta, bool tb, int m, int n, int k, uint64_t seed) {
  const int batch = 2, ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  const int64_t lda = ar + 1, ldb = br + 2, ldc = m;
  const int64_t sa = lda * ac + 3, sb = ldb * bc + 5, sc = ldc * n;
  const size_t na = static_cast<size_t>(sa * batch), nb = static_cast<size_t>(sb * batch), nc = static_cast<size_t>(sc * batch);
  Rng r{seed};
  std::vector<uint16_t> a16(na), b16(nb);
  std::vector<float> a32(na), b32(nb);
  auto draw16 = [&](uint16_t *h) { // random finite patterns: fp16 exponents 0..17 (subnormals too), bf16 near 1
    const uint32_t bits = static_cast<uint32_t>((r.next() + 1.0f) * 32768.0f) ^ (static_cast<uint32_t>(r.next() * 9e4f) << 3);
    if (kind == Lowp::Fp16)
      *h = static_cast<uint16_t>((bits & 0x83ff) | ((bits >> 4) % 18) << 10);
    else
      *h = static_cast<uint16_t>((bits & 0x807f) | (117 + (bits >> 3) % 13) << 7);
  };
  for (size_t i = 0; i < na; i++) kind == Lowp::Tf32 ? void(a32[i] = r.next() * 3.0f) : draw16(&a16[i]);
  for (size_t i = 0; i < nb; i++) kind == Lowp::Tf32 ? void(b32[i] = r.next() * 3.0f) : draw16(&b16[i]);
  const std::vector<float> hc = randoms(nc, seed + 1);
  void *da, *db;
  const size_t esz = kind == Lowp::Tf32 ? 4 : 2;
  CUDA_OK(cudaMalloc(&da, na * esz));
  CUDA_OK(cudaMalloc(&db, nb * esz));
  CUDA_OK(cudaMemcpy(da, kind == Lowp::Tf32 ? static_cast<const void *>(a32.data()) : a16.data(), na * esz,
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, kind == Lowp::Tf32 ? static_cast<const void *>(b32.data()) : b16.data(), nb * esz,
                     cudaMemcpyHostToDevice));
  float *dc = upload(hc), *dd = device_floats(nc);
  const cudaDataType_t t = kind == Lowp::Bf16 ? CUDA_R_16BF : kind == Lowp::Fp16 ? CUDA_R_16F : CUDA_R_32F;
  cublasLtMatmulDesc_t desc;
  LT_OK(cublasLtMatmulDescCreate(&desc, kind == Lowp::Tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                 CUDA_R_32F));
  const int32_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
  auto lay = [&](cudaDataType_t type, int rows, int cols, int64_t ld, int64_t stride) {
    cublasLtMatrixLayout_t l;
    LT_OK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
    const int32_t b = batch;
    LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    LT_OK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return l;
  };
  cublasLtMatrixLayout_t la = lay(t, ar, ac, lda, sa), lb = lay(t, br, bc, ldb, sb), lc = lay(CUDA_R_32F, m, n, ldc, sc);
  const float alpha = 0.75f, beta = 0.5f;
  LT_OK(cublasLtMatmul(env.lt, desc, &alpha, da, la, db, lb, &beta, dc, lc, dd, lc, nullptr, nullptr, 0, env.stream));
  CUDA_OK(cudaStreamSynchronize(env.stream));
  const std::vector<float> got = download(dd, nc);
  // reading 0: the kind's own; reading 1: the wrong one
  auto value = [&](bool is_a, size_t i, int reading) -> double {
    if (kind == Lowp::Tf32) {
      const float v = is_a ? a32[i] : b32[i];
      return reading == 0 ? t_tf32(v) : v;
    }
    const uint16_t h = is_a ? a16[i] : b16[i];
    const bool as_bf16 = (kind == Lowp::Bf16) == (reading == 0);
    return as_bf16 ? t_bf16(h) : t_fp16(h);
  };
  double worst[2] = {0.0, 0.0}; // error / tolerance under each reading
  for (int bi = 0; bi < batch; bi++)
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        for (int reading = 0; reading < 2; reading++) {
          double acc = 0.0, mag = 0.0;
          for (int q = 0; q < k; q++) {
            const size_t ia = static_cast<size_t>(bi * sa + (ta ? q + i * lda : i + q * lda));
            const size_t ib = static_cast<size_t>(bi * sb + (tb ? j + q * ldb : q + j * ldb));
            const double p = value(true, ia, reading) * value(false, ib, reading);
            acc += p;
            mag += std::fabs(p);
          }
          const double cv = beta * static_cast<double>(hc[static_cast<size_t>(bi * sc + i + j * ldc)]);
          const double want = alpha * acc + cv, tol = (k + 2) * 0x1p-24 * (alpha * mag + std::fabs(cv)) + 1e-30;
          const double e = std::fabs(got[static_cast<size_t>(bi * sc + i + j * ldc)] - want) / tol;
          worst[reading] = std::max(worst[reading], e);
        }
      }
  const char *name = kind == Lowp::Tf32 ? "FAST_TF32" : kind == Lowp::Bf16 ? "CUDA_R_16BF" : "CUDA_R_16F";
  if (worst[0] > 1.0 || worst[1] <= 1.0) {
    fprintf(stderr, "FAIL cublasLtMatmul %s %s%s m=%d n=%d k=%d: error %.3g x tolerance (must be <= 1), under the "
            "wrong reading %.3g x (must be > 1)\n", name, ta ? "T" : "N", tb ? "T" : "N", m, n, k, worst[0], worst[1]);
    exit(1);
  }
  for (cublasLtMatrixLayout_t l : {la, lb, lc}) LT_OK(cublasLtMatrixLayoutDestroy(l));
  LT_OK(cublasLtMatmulDescDestroy(desc));
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaFree(dd));
}

// bits -> value of the 16-bit type, and the gap between v and its 16-bit neighbours (an ulp at |v|)
double ulp16(Lowp kind, double v) {
  const int e = v == 0.0 ? -126 : std::ilogb(v);
  return kind == Lowp::Bf16 ? std::ldexp(1.0, std::max(e, -126) - 7) : std::ldexp(1.0, std::max(e, -14) - 10);
}

// 16-bit C and D (A's type) with the BIAS epilogue and a bias of D's type: D = round(alpha op(A) op(B) +
// beta C + bias), checked against the double reference within half an ulp of the 16-bit result plus the
// float sums' bound; the reference without the bias must fail (the bias is read, as D's type).
void check_lowp_gemm_out16(const LtEnv &env, Lowp kind, int m, int n, int k, uint64_t seed) {
  Rng r{seed};
  const bool bf = kind == Lowp::Bf16;
  auto round16 = [&](float v) -> uint16_t { // host rounding: nearest even, via the value grid
    const double u = ulp16(kind, v), q = std::nearbyint(v / u) * u;
    const float f = static_cast<float>(q);
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if (bf) return static_cast<uint16_t>(b >> 16);
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    memcpy(&hb, &h, sizeof hb);
    return hb;
  };
  auto value = [&](uint16_t h) -> double { return bf ? t_bf16(h) : t_fp16(h); };
  std::vector<uint16_t> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n), c(static_cast<size_t>(m) * n),
      bias(static_cast<size_t>(m));
  for (auto &x : a) x = round16(r.next());
  for (auto &x : b) x = round16(r.next());
  for (auto &x : c) x = round16(r.next() * 2.0f);
  for (auto &x : bias) x = round16(r.next() * 4.0f);
  auto up = [&](const std::vector<uint16_t> &h) {
    void *d;
    CUDA_OK(cudaMalloc(&d, h.size() * 2));
    CUDA_OK(cudaMemcpy(d, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
    return d;
  };
  void *da = up(a), *db = up(b), *dc = up(c), *dbias = up(bias), *dd;
  CUDA_OK(cudaMalloc(&dd, c.size() * 2));
  const cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_16F;
  cublasLtMatmulDesc_t desc;
  LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const uint32_t epi = CUBLASLT_EPILOGUE_BIAS;
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias, sizeof dbias));
  cublasLtMatrixLayout_t la, lb, lc;
  LT_OK(cublasLtMatrixLayoutCreate(&la, t, static_cast<uint64_t>(m), static_cast<uint64_t>(k), m));
  LT_OK(cublasLtMatrixLayoutCreate(&lb, t, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  LT_OK(cublasLtMatrixLayoutCreate(&lc, t, static_cast<uint64_t>(m), static_cast<uint64_t>(n), m));
  const float alpha = 1.0f, beta = 0.5f;
  LT_OK(cublasLtMatmul(env.lt, desc, &alpha, da, la, db, lb, &beta, dc, lc, dd, lc, nullptr, nullptr, 0, env.stream));
  CUDA_OK(cudaStreamSynchronize(env.stream));
  std::vector<uint16_t> got(c.size());
  CUDA_OK(cudaMemcpy(got.data(), dd, got.size() * 2, cudaMemcpyDeviceToHost));
  double worst = 0.0, worst_unbiased = 0.0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      double acc = 0.0, mag = 0.0;
      for (int q = 0; q < k; q++) {
        const double p = value(a[static_cast<size_t>(i + q * m)]) * value(b[static_cast<size_t>(q + j * k)]);
        acc += p, mag += std::fabs(p);
      }
      const double cv = beta * value(c[static_cast<size_t>(i + j * m)]), bv = value(bias[static_cast<size_t>(i)]);
      const double want = alpha * acc + cv + bv, g = value(got[static_cast<size_t>(i + j * m)]);
      const double tol = 0.5 * ulp16(kind, want) + (k + 3) * 0x1p-24 * (mag + std::fabs(cv) + std::fabs(bv)) + 1e-30;
      worst = std::max(worst, std::fabs(g - want) / tol);
      worst_unbiased = std::max(worst_unbiased, std::fabs(g - (want - bv)) / tol);
    }
  if (worst > 1.0 || worst_unbiased <= 1.0) {
    fprintf(stderr, "FAIL cublasLtMatmul %s C and D with a %s bias m=%d n=%d k=%d: error %.3g x tolerance (must be "
            "<= 1), without the bias %.3g x (must be > 1)\n", bf ? "bf16" : "fp16", bf ? "bf16" : "fp16", m, n, k,
            worst, worst_unbiased);
    exit(1);
  }
  for (cublasLtMatrixLayout_t l : {la, lb, lc}) LT_OK(cublasLtMatrixLayoutDestroy(l));
  LT_OK(cublasLtMatmulDescDestroy(desc));
  for (void *d : {da, db, dc, dbias, dd}) CUDA_OK(cudaFree(d));
}

void cublaslt_lowp(const LtEnv &env) {
  uint64_t seed = 5000;
  const int sizes[][3] = {{7, 5, 33}, {16, 9, 64}, {1, 31, 17}};
  for (Lowp kind : {Lowp::Tf32, Lowp::Bf16, Lowp::Fp16})
    for (int tr = 0; tr < 4; tr++)
      for (const auto &sz : sizes) check_lowp_gemm(env, kind, tr & 1, tr >> 1, sz[0], sz[1], sz[2], seed += 7);
  // combinations cuBLASLt's type table does not list, or that the stand-in does not compute
  float *f = device_floats(64);
  cublasLtMatmulDesc_t d32, dtf32;
  cublasLtMatrixLayout_t h16, b16, f32, c16;
  LT_OK(cublasLtMatmulDescCreate(&d32, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_OK(cublasLtMatmulDescCreate(&dtf32, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
  LT_OK(cublasLtMatrixLayoutCreate(&h16, CUDA_R_16F, 4, 4, 4));
  LT_OK(cublasLtMatrixLayoutCreate(&b16, CUDA_R_16BF, 4, 4, 4));
  LT_OK(cublasLtMatrixLayoutCreate(&f32, CUDA_R_32F, 4, 4, 4));
  LT_OK(cublasLtMatrixLayoutCreate(&c16, CUDA_R_16F, 4, 4, 4));
  const float one = 1.0f, zero = 0.0f;
  LT_EXPECT(cublasLtMatmul(env.lt, d32, &one, f, h16, f, f32, &zero, f, f32, f, f32, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_NOT_SUPPORTED); // A fp16, B fp32
  LT_EXPECT(cublasLtMatmul(env.lt, d32, &one, f, h16, f, b16, &zero, f, f32, f, f32, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_NOT_SUPPORTED); // A fp16, B bf16
  LT_EXPECT(cublasLtMatmul(env.lt, dtf32, &one, f, b16, f, b16, &zero, f, f32, f, f32, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_NOT_SUPPORTED); // 16-bit inputs under FAST_TF32
  LT_EXPECT(cublasLtMatmul(env.lt, d32, &one, f, b16, f, b16, &zero, f, c16, f, c16, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_NOT_SUPPORTED); // bf16 A and B, fp16 C and D
  cublasLtMatmulDesc_t tmp;
  LT_EXPECT(cublasLtMatmulDescCreate(&tmp, CUBLAS_COMPUTE_32F_FAST_16BF, CUDA_R_32F), CUBLAS_STATUS_NOT_SUPPORTED);
  for (cublasLtMatrixLayout_t l : {h16, b16, f32, c16}) LT_OK(cublasLtMatrixLayoutDestroy(l));
  LT_OK(cublasLtMatmulDescDestroy(d32));
  LT_OK(cublasLtMatmulDescDestroy(dtf32));
  CUDA_OK(cudaFree(f));
  for (Lowp kind : {Lowp::Bf16, Lowp::Fp16}) check_lowp_gemm_out16(env, kind, 7, 5, 33, seed += 7);
  printf("ok   cublasLtMatmul: CUDA_R_16BF / CUDA_R_16F A and B with fp32 C and D, CUBLAS_COMPUTE_32F_FAST_TF32: "
         "exact products of the rounded inputs, fp32 sums; 16-bit C and D with a bias of D's type (the float "
         "result rounded once); unlisted type combinations NOT_SUPPORTED\n");
}

void cublaslt_errors(const LtEnv &env) {
  float *a = device_floats(64 * 64), *b = device_floats(64 * 64), *d = device_floats(64 * 64);
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld, bad_ld;
  LT_OK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_OK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 8, 4, 8));  // A: m 8 x k 4
  LT_OK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 4, 6, 4));  // B: k 4 x n 6
  LT_OK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 8, 6, 8));  // D: m 8 x n 6
  LT_OK(cublasLtMatrixLayoutCreate(&bad_ld, CUDA_R_32F, 8, 6, 7)); // ld < rows
  const float one = 1.0f, zero = 0.0f;
  cublasLtMatmulPreference_t pref;
  LT_OK(cublasLtMatmulPreferenceCreate(&pref));
  cublasLtMatmulHeuristicResult_t res;
  int count = -1;

  // statuses of the setup calls
  cublasLtHandle_t h;
  LT_EXPECT(cublasLtCreate(nullptr), CUBLAS_STATUS_INVALID_VALUE);
  LT_OK(cublasLtCreate(&h));
  LT_OK(cublasLtDestroy(h));
  cublasLtMatrixLayout_t tmp;
  LT_EXPECT(cublasLtMatrixLayoutCreate(&tmp, CUDA_R_64F, 8, 8, 8), CUBLAS_STATUS_NOT_SUPPORTED);
  LT_EXPECT(cublasLtMatmulDescCreate(nullptr, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDesc_t tmpd;
  LT_EXPECT(cublasLtMatmulDescCreate(&tmpd, CUBLAS_COMPUTE_64F, CUDA_R_64F), CUBLAS_STATUS_NOT_SUPPORTED);
  const int32_t op_t = CUBLAS_OP_T, op_bad = 7;
  const int64_t i64 = 1;
  LT_EXPECT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof i64),
            CUBLAS_STATUS_INVALID_VALUE); // wrong size
  LT_EXPECT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, sizeof op_t),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_EXPECT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_bad, sizeof op_bad),
            CUBLAS_STATUS_INVALID_VALUE);
  const uint32_t dgelu = CUBLASLT_EPILOGUE_DGELU, bogus = 12345;
  LT_EXPECT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &dgelu, sizeof dgelu),
            CUBLAS_STATUS_NOT_SUPPORTED);
  LT_EXPECT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &bogus, sizeof bogus),
            CUBLAS_STATUS_INVALID_VALUE);
  const int32_t batch16 = 2;
  LT_EXPECT(cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch16, sizeof i64),
            CUBLAS_STATUS_INVALID_VALUE);
  const uint32_t ws32 = 1;
  LT_EXPECT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws32, sizeof ws32),
            CUBLAS_STATUS_INVALID_VALUE); // uint64_t
  CHECK(strcmp(cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE") == 0);
  CHECK(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED)[0] != '\0');

  // the heuristic
  LT_OK(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, ld, ld, pref, 1, &res, &count));
  CHECK(count == 1 && res.workspaceSize == 0); // default preference: no workspace
  const uint64_t big = 1 << 20;
  LT_OK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &big, sizeof big));
  LT_OK(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, ld, ld, pref, 1, &res, &count));
  CHECK(count == 1 && res.workspaceSize == 256); // 8 x 6 floats, rounded up to 256 bytes
  LT_EXPECT(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, ld, ld, pref, 0, &res, &count),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_EXPECT(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, la, lb, ld, ld, pref, 1, &res, &count),
            CUBLAS_STATUS_NOT_INITIALIZED);
  LT_EXPECT(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, lb, la, ld, ld, pref, 1, &res, &count),
            CUBLAS_STATUS_INVALID_VALUE); // shapes do not chain
  LT_EXPECT(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, bad_ld, bad_ld, pref, 1, &res, &count),
            CUBLAS_STATUS_INVALID_VALUE); // ld < rows

  // cublasLtMatmul
  const cublasLtMatmulAlgo_t algo = res.algo; // needs 256 bytes of workspace
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &algo, env.workspace, 255, env.stream),
            CUBLAS_STATUS_INVALID_VALUE); // too little workspace
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &algo, nullptr, 256, env.stream),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulAlgo_t forged = algo;
  forged.data[0] ^= 1;
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &forged, env.workspace, 256, env.stream),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_EXPECT(cublasLtMatmul(env.lt, desc, nullptr, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, nullptr, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_INVALID_VALUE);
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &one, nullptr, ld, d, ld, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_INVALID_VALUE); // beta != 0 needs C
  const int32_t batch2 = 2;
  LT_OK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch2, sizeof batch2));
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_INVALID_VALUE); // batch counts differ
  const int32_t batch1 = 1;
  LT_OK(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch1, sizeof batch1));
  const uint32_t with_bias = CUBLASLT_EPILOGUE_BIAS;
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &with_bias, sizeof with_bias));
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, env.stream),
            CUBLAS_STATUS_INVALID_VALUE); // BIAS without a bias pointer
  const uint32_t plain = CUBLASLT_EPILOGUE_DEFAULT;
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof plain));
  cudaStream_t dead;
  CUDA_OK(cudaStreamCreate(&dead));
  CUDA_OK(cudaStreamDestroy(dead));
  LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, dead),
            CUBLAS_STATUS_EXECUTION_FAILED);

  // the GEMM is queued, not run at the call: the stream has work until it is synchronised
  CUDA_OK(cudaStreamSynchronize(env.stream));
  LT_OK(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &algo, env.workspace, 256, env.stream));
  CHECK(cudaStreamQuery(env.stream) == cudaErrorNotReady);
  CUDA_OK(cudaStreamSynchronize(env.stream));
  printf("ok   cuBLASLt statuses: NOT_INITIALIZED, INVALID_VALUE (sizes, NULLs, shapes, ld, batch, workspace, "
         "bias), NOT_SUPPORTED, EXECUTION_FAILED; the GEMM is queued on the stream\n");

  // a matrix in host memory, or past the end of its allocation: reported (a GPU faults)
  static float host_a[64];
  expect_death("cublasLtMatmul with A in host memory", [&] {
    cublasLtMatmul(env.lt, desc, &one, host_a, la, b, lb, &zero, d, ld, d, ld, nullptr, nullptr, 0, env.stream);
  }, SIGABRT, {"cublasLtMatmul: A at", "host memory, not device memory"});
  float *small_d = device_floats(8 * 6 - 1);
  expect_death("cublasLtMatmul with D one element short", [&] {
    cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, small_d, ld, small_d, ld, nullptr, nullptr, 0, env.stream);
  }, SIGABRT, {"cublasLtMatmul: D at", "not inside one live device allocation"});

  // pointer alignment: an algorithm is chosen for pointers aligned as the preference says (256 bytes
  // unless told); a pointer less aligned than that is NOT_SUPPORTED at the matmul, with or without an
  // explicit algo; told 4, the same call runs. The bias vector must be 16-byte aligned (a GPU faults).
  cublasLtMatmulPreference_t pref_default, pref_4;
  LT_OK(cublasLtMatmulPreferenceCreate(&pref_default));
  LT_OK(cublasLtMatmulPreferenceCreate(&pref_4));
  const uint32_t four = 4;
  for (int m = 0; m < 4; m++) // A, B, C, D
    LT_OK(cublasLtMatmulPreferenceSetAttribute(
        pref_4, static_cast<cublasLtMatmulPreferenceAttributes_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + m), &four,
        sizeof four));
  LT_EXPECT(cublasLtMatmulPreferenceSetAttribute(pref_4, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &i64, sizeof i64),
            CUBLAS_STATUS_INVALID_VALUE); // uint32_t
  cublasLtMatmulHeuristicResult_t res_default, res_4;
  LT_OK(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, ld, ld, pref_default, 1, &res_default, &count));
  LT_OK(cublasLtMatmulAlgoGetHeuristic(env.lt, desc, la, lb, ld, ld, pref_4, 1, &res_4, &count));
  for (int m = 0; m < 4; m++) { // each of A, B, D (in place: C too) one float past 256-byte alignment
    const float *pa = m == 0 ? a + 1 : a, *pb = m == 1 ? b + 1 : b;
    float *pd = m >= 2 ? d + 1 : d;
    const float *beta = m == 3 ? &one : &zero; // m 3: C (= D) read
    LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, pa, la, pb, lb, beta, pd, ld, pd, ld, &res_default.algo, nullptr, 0,
                             env.stream),
              CUBLAS_STATUS_NOT_SUPPORTED);
    LT_EXPECT(cublasLtMatmul(env.lt, desc, &one, pa, la, pb, lb, beta, pd, ld, pd, ld, nullptr, nullptr, 0, env.stream),
              CUBLAS_STATUS_NOT_SUPPORTED);
    LT_OK(cublasLtMatmul(env.lt, desc, &one, pa, la, pb, lb, beta, pd, ld, pd, ld, &res_4.algo, nullptr, 0, env.stream));
  }
  CUDA_OK(cudaStreamSynchronize(env.stream));
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &with_bias, sizeof with_bias));
  const float *bias_16 = b + 4, *bias_4 = b + 1;
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_16, sizeof bias_16));
  LT_OK(cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &res_4.algo, nullptr, 0, env.stream));
  CUDA_OK(cudaStreamSynchronize(env.stream));
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_4, sizeof bias_4));
  expect_death("cublasLtMatmul with a bias vector 4 bytes past 16-byte alignment", [&] {
    cublasLtMatmul(env.lt, desc, &one, a, la, b, lb, &zero, d, ld, d, ld, &res_4.algo, nullptr, 0, env.stream);
  }, SIGABRT, {"the bias vector", "is not 16-byte aligned", "misaligned address"});
  LT_OK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof plain));
  printf("ok   cuBLASLt pointer alignment: A, B, C, D 4 bytes past 256-byte alignment NOT_SUPPORTED under the "
         "default preference, run when the preference says 4; a bias vector off 16-byte alignment caught\n");
  LT_OK(cublasLtMatmulPreferenceDestroy(pref_default));
  LT_OK(cublasLtMatmulPreferenceDestroy(pref_4));

  for (cublasLtMatrixLayout_t l : {la, lb, ld, bad_ld}) LT_OK(cublasLtMatrixLayoutDestroy(l));
  LT_OK(cublasLtMatmulDescDestroy(desc));
  LT_OK(cublasLtMatmulPreferenceDestroy(pref));
  for (float *p : {a, b, d, small_d}) CUDA_OK(cudaFree(p));
}

// D[m,n] = A[m,k] B[k,n] (column-major, no transposes, beta 0) under compute type `compute`, on the
// stream, downloaded.
std::vector<float> plain_gemm(const LtEnv &env, cublasComputeType_t compute, const std::vector<float> &a,
                              const std::vector<float> &b, int m, int n, int k) {
  float *da = upload(a), *db = upload(b), *dd = device_floats(static_cast<size_t>(m) * n);
  cublasLtMatmulDesc_t desc;
  LT_OK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  cublasLtMatrixLayout_t la = make_layout(m, k, m, 1, 0), lb = make_layout(k, n, k, 1, 0), ld = make_layout(m, n, m, 1, 0);
  const float one = 1.0f, zero = 0.0f;
  LT_OK(cublasLtMatmul(env.lt, desc, &one, da, la, db, lb, &zero, dd, ld, dd, ld, nullptr, nullptr, 0, env.stream));
  CUDA_OK(cudaStreamSynchronize(env.stream));
  std::vector<float> d = download(dd, static_cast<size_t>(m) * n);
  for (auto l : {la, lb, ld}) LT_OK(cublasLtMatrixLayoutDestroy(l));
  LT_OK(cublasLtMatmulDescDestroy(desc));
  for (float *p : {da, db, dd}) CUDA_OK(cudaFree(p));
  return d;
}

// The summation order of a GPU, not a CPU's: a check that expects the bits of a CPU loop (k order,
// one rounding per product and per sum) fails on the emulated device as it would on a GPU; the
// order (split-K, chunk size) changes with HS_CUDA_EMU_SEED and never with a repeat of one seed; every
// result stays within the bound of any fp32 summation order, 2 gamma_k sum |a_iq b_qj| (docs/gpu.md).
void cublaslt_order(const LtEnv &env) {
  const int m = 16, n = 16, k = 257;
  const std::vector<float> a = randoms(static_cast<size_t>(m) * k, 71), b = randoms(static_cast<size_t>(k) * n, 72);
  std::vector<float> cpu(static_cast<size_t>(m) * n);
  std::vector<double> mag(cpu.size()), exact(cpu.size());
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      float acc = 0.0f;
      double e = 0.0, s = 0.0;
      for (int q = 0; q < k; q++) {
        const float p = a[i + static_cast<size_t>(q) * m] * b[q + static_cast<size_t>(j) * k];
        acc = acc + p; // the plain loop of a CPU reference, rounded per product and per sum
        e += static_cast<double>(a[i + static_cast<size_t>(q) * m]) * b[q + static_cast<size_t>(j) * k];
        s += std::fabs(static_cast<double>(a[i + static_cast<size_t>(q) * m]) * b[q + static_cast<size_t>(j) * k]);
      }
      cpu[i + static_cast<size_t>(j) * m] = acc;
      exact[i + static_cast<size_t>(j) * m] = e;
      mag[i + static_cast<size_t>(j) * m] = s;
    }
  const double u = 0x1p-24, gamma = k * u / (1.0 - k * u);
  std::vector<std::vector<float>> by_seed;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    hs_emu_set_seed(seed);
    by_seed.push_back(plain_gemm(env, CUBLAS_COMPUTE_32F, a, b, m, n, k));
    CHECK(plain_gemm(env, CUBLAS_COMPUTE_32F, a, b, m, n, k) == by_seed.back()); // one seed: the same bits
    size_t differ = 0;
    for (size_t i = 0; i < cpu.size(); i++) {
      differ += by_seed.back()[i] != cpu[i];
      CHECK(std::fabs(by_seed.back()[i] - exact[i]) <= gamma * mag[i]);
    }
    if (differ == 0)
      FAILF("cublasLtMatmul m=%d n=%d k=%d under seed %llu has the bits of a CPU loop in k order: a test that "
            "expects them would pass here and fail on a GPU\n",
            m, n, k, static_cast<unsigned long long>(seed));
  }
  int other_seeds = 0;
  for (size_t s = 1; s < by_seed.size(); s++) other_seeds += by_seed[s] != by_seed[0];
  CHECK(other_seeds > 0);
  hs_emu_set_seed(1);
  printf("ok   cublasLtMatmul sums in a blocked, split-K order: never a CPU loop's bits (k=%d), other bits under "
         "%d of 7 other seeds, the same under one seed, within 2 gamma_k sum |ab| of the exact product\n",
         k, other_seeds);

  // TF32 operands, nearest with ties to even at 2^-10 (CUTLASS's round_to_nearest): B = [1] so D = A
  // rounded; truncation would give 1, 1 + 2^-10, 1, -1 and ties away 1 + 2^-10, 1 + 2^-9, 1 + 2^-10, ...
  const std::vector<float> ta = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-20f,
                                 -(1.0f + 0x1p-11f), 1.0f + 0x1p-12f};
  const std::vector<float> want = {1.0f, 1.0f + 0x1p-9f, 1.0f + 0x1p-10f, -1.0f, 1.0f};
  const std::vector<float> got = plain_gemm(env, CUBLAS_COMPUTE_32F_FAST_TF32, ta, {1.0f}, 5, 1, 1);
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i])
      FAILF("FAST_TF32 operand %.9g became %.9g, not %.9g (nearest, ties to even at 2^-10)\n",
            static_cast<double>(ta[i]), static_cast<double>(got[i]), static_cast<double>(want[i]));
  printf("ok   FAST_TF32 rounds each operand to nearest, ties to even (1 + 2^-11 -> 1, 1 + 3 2^-11 -> 1 + 2^-9)\n");
}

void cublaslt_tests() {
  LtEnv env;
  LT_OK(cublasLtCreate(&env.lt));
  CUDA_OK(cudaStreamCreateWithFlags(&env.stream, cudaStreamNonBlocking));
  env.workspace_bytes = 1 << 20;
  CUDA_OK(cudaMalloc(&env.workspace, env.workspace_bytes));
  cublaslt_results(env);
  cublaslt_lowp(env);
  cublaslt_order(env);
  cublaslt_errors(env);
  CUDA_OK(cudaFree(env.workspace));
  CUDA_OK(cudaStreamDestroy(env.stream));
  LT_OK(cublasLtDestroy(env.lt));
  LT_EXPECT(cublasLtDestroy(env.lt), CUBLAS_STATUS_NOT_INITIALIZED);
}

// ==== cuDNN ===========================================================================================

struct ConvCase {
  int n, c, h, w, k, r, s, pad, stride, dil;
  cudnnConvolutionMode_t mode;
};

// naive references in double: y[n,k,oh,ow] = sum x[n,c,oh*u-p+r*d, ...] * w[k,c,r',s'] (r' flipped for
// CUDNN_CONVOLUTION); backward data and filter scatter the same products
struct ConvRef {
  ConvCase cc;
  int oh, ow;
  size_t xi(int n, int c, int h, int w) const { return ((static_cast<size_t>(n) * cc.c + c) * cc.h + h) * cc.w + w; }
  size_t wi(int k, int c, int r, int s) const { return ((static_cast<size_t>(k) * cc.c + c) * cc.r + r) * cc.s + s; }
  size_t yi(int n, int k, int h, int w) const { return ((static_cast<size_t>(n) * cc.k + k) * oh + h) * ow + w; }
  template <typename F> void each(F f) const { // f(x index, w index, y index)
    for (int n = 0; n < cc.n; n++)
      for (int k = 0; k < cc.k; k++)
        for (int y = 0; y < oh; y++)
          for (int x = 0; x < ow; x++)
            for (int c = 0; c < cc.c; c++)
              for (int r = 0; r < cc.r; r++)
                for (int s = 0; s < cc.s; s++) {
                  const int ih = y * cc.stride - cc.pad + r * cc.dil, iw = x * cc.stride - cc.pad + s * cc.dil;
                  if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
                  const int fr = cc.mode == CUDNN_CONVOLUTION ? cc.r - 1 - r : r;
                  const int fs = cc.mode == CUDNN_CONVOLUTION ? cc.s - 1 - s : s;
                  f(xi(n, c, ih, iw), wi(k, c, fr, fs), yi(n, k, y, x));
                }
  }
};

void expect_close(const char *what, const std::vector<float> &got, const std::vector<double> &want) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (!approx(got[i], want[i]) && bad++ < 5)
      fprintf(stderr, "  %s[%zu] = %g, expected %g\n", what, i, static_cast<double>(got[i]), want[i]);
  if (bad != 0) {
    fprintf(stderr, "FAIL %s: %d of %zu wrong\n", what, bad, want.size());
    exit(1);
  }
}

struct Dnn {
  cudnnHandle_t h;
  cudaStream_t stream;
};

void check_conv(const Dnn &env, const ConvCase &cc, uint64_t seed) {
  cudnnTensorDescriptor_t xd, yd, bd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  DNN_OK(cudnnCreateTensorDescriptor(&xd));
  DNN_OK(cudnnCreateTensorDescriptor(&yd));
  DNN_OK(cudnnCreateTensorDescriptor(&bd));
  DNN_OK(cudnnCreateFilterDescriptor(&wd));
  DNN_OK(cudnnCreateConvolutionDescriptor(&cd));
  // fp32 results need CUDNN_FMA_MATH (the default permits TF32); set before the 2-d parameters, which
  // must keep it
  DNN_OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  DNN_OK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cc.n, cc.c, cc.h, cc.w));
  DNN_OK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cc.k, cc.c, cc.r, cc.s));
  DNN_OK(cudnnSetConvolution2dDescriptor(cd, cc.pad, cc.pad, cc.stride, cc.stride, cc.dil, cc.dil, cc.mode,
                                         CUDNN_DATA_FLOAT));
  int on, oc, oh, ow;
  DNN_OK(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow));
  CHECK(on == cc.n && oc == cc.k);
  CHECK(oh == 1 + (cc.h + 2 * cc.pad - ((cc.r - 1) * cc.dil + 1)) / cc.stride);
  CHECK(ow == 1 + (cc.w + 2 * cc.pad - ((cc.s - 1) * cc.dil + 1)) / cc.stride);
  DNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));
  DNN_OK(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, oc, 1, 1));
  const ConvRef ref{cc, oh, ow};
  const size_t nx = static_cast<size_t>(cc.n) * cc.c * cc.h * cc.w, nw = static_cast<size_t>(cc.k) * cc.c * cc.r * cc.s;
  const size_t ny = static_cast<size_t>(on) * oc * oh * ow;
  const std::vector<float> hx = randoms(nx, seed), hw = randoms(nw, seed + 1), hy = randoms(ny, seed + 2);
  const std::vector<float> hprev_x = randoms(nx, seed + 3), hprev_w = randoms(nw, seed + 4);
  const std::vector<float> hprev_y = randoms(ny, seed + 5), hbias = randoms(static_cast<size_t>(oc), seed + 6);
  float *dx = upload(hx), *dw = upload(hw), *ddy = upload(hy), *dbias = upload(hbias);
  std::vector<double> fwd(ny, 0.0), bwd_data(nx, 0.0), bwd_filter(nw, 0.0), bwd_bias(static_cast<size_t>(oc), 0.0);
  ref.each([&](size_t xi, size_t wi, size_t yi) {
    fwd[yi] += static_cast<double>(hx[xi]) * hw[wi];
    bwd_data[xi] += static_cast<double>(hy[yi]) * hw[wi];
    bwd_filter[wi] += static_cast<double>(hy[yi]) * hx[xi];
  });
  for (size_t i = 0; i < ny; i++) bwd_bias[i / (static_cast<size_t>(oh) * ow) % oc] += hy[i];
  const float alpha = 1.5f, beta_half = 0.5f, zero = 0.0f;

  // heuristics: the first answer is deterministic and runs; the workspace sizes agree
  cudnnConvolutionFwdAlgoPerf_t fp[8];
  cudnnConvolutionBwdDataAlgoPerf_t dp[8];
  cudnnConvolutionBwdFilterAlgoPerf_t wp[8];
  int nf = 0, nd = 0, nwp = 0;
  DNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(env.h, xd, wd, cd, yd, 8, &nf, fp));
  DNN_OK(cudnnGetConvolutionBackwardDataAlgorithm_v7(env.h, wd, yd, cd, xd, 8, &nd, dp));
  DNN_OK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(env.h, xd, yd, cd, wd, 8, &nwp, wp));
  CHECK(nf >= 2 && fp[0].status == CUDNN_STATUS_SUCCESS && fp[0].determinism == CUDNN_DETERMINISTIC);
  CHECK(nd >= 2 && dp[0].status == CUDNN_STATUS_SUCCESS && dp[0].determinism == CUDNN_DETERMINISTIC);
  CHECK(nwp >= 2 && wp[0].status == CUDNN_STATUS_SUCCESS && wp[0].determinism == CUDNN_DETERMINISTIC);
  CHECK(fp[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM && fp[0].memory == 0);
  CHECK(fp[0].mathType == CUDNN_FMA_MATH && dp[0].mathType == CUDNN_FMA_MATH && wp[0].mathType == CUDNN_FMA_MATH);
  CHECK(wp[0].algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 && wp[0].memory == nw * sizeof(float));

  // forward with each algorithm that runs: beta 0 over NaN, then beta 0.5 over previous values
  for (int i = 0; i < nf; i++) {
    if (fp[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t ws_bytes = 12345;
    DNN_OK(cudnnGetConvolutionForwardWorkspaceSize(env.h, xd, wd, cd, yd, fp[i].algo, &ws_bytes));
    CHECK(ws_bytes == fp[i].memory);
    void *ws = nullptr;
    if (ws_bytes) CUDA_OK(cudaMalloc(&ws, ws_bytes));
    float *dy = device_floats(ny); // NaN
    DNN_OK(cudnnConvolutionForward(env.h, &alpha, xd, dx, wd, dw, cd, fp[i].algo, ws, ws_bytes, &zero, yd, dy));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    std::vector<double> want(ny);
    for (size_t j = 0; j < ny; j++) want[j] = alpha * fwd[j];
    expect_close("cudnnConvolutionForward y (beta 0)", download(dy, ny), want);
    CUDA_OK(cudaMemcpy(dy, hprev_y.data(), ny * sizeof(float), cudaMemcpyHostToDevice));
    DNN_OK(cudnnConvolutionForward(env.h, &alpha, xd, dx, wd, dw, cd, fp[i].algo, ws, ws_bytes, &beta_half, yd, dy));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    for (size_t j = 0; j < ny; j++) want[j] = alpha * fwd[j] + 0.5 * hprev_y[j];
    expect_close("cudnnConvolutionForward y (beta 0.5)", download(dy, ny), want);
    // cudnnAddTensor: y += bias (1 x K x 1 x 1 broadcast)
    const float one = 1.0f;
    DNN_OK(cudnnAddTensor(env.h, &one, bd, dbias, &one, yd, dy));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    for (size_t j = 0; j < ny; j++) want[j] += hbias[j / (static_cast<size_t>(oh) * ow) % oc];
    expect_close("cudnnAddTensor", download(dy, ny), want);
    CUDA_OK(cudaFree(dy));
    if (ws) CUDA_OK(cudaFree(ws));
  }
  for (int i = 0; i < nd; i++) {
    if (dp[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t ws_bytes = 12345;
    DNN_OK(cudnnGetConvolutionBackwardDataWorkspaceSize(env.h, wd, yd, cd, xd, dp[i].algo, &ws_bytes));
    CHECK(ws_bytes == dp[i].memory);
    void *ws = nullptr;
    if (ws_bytes) CUDA_OK(cudaMalloc(&ws, ws_bytes));
    float *dgx = device_floats(nx);
    DNN_OK(cudnnConvolutionBackwardData(env.h, &alpha, wd, dw, yd, ddy, cd, dp[i].algo, ws, ws_bytes, &zero, xd, dgx));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    std::vector<double> want(nx);
    for (size_t j = 0; j < nx; j++) want[j] = alpha * bwd_data[j];
    expect_close("cudnnConvolutionBackwardData dx (beta 0)", download(dgx, nx), want);
    CUDA_OK(cudaMemcpy(dgx, hprev_x.data(), nx * sizeof(float), cudaMemcpyHostToDevice));
    DNN_OK(cudnnConvolutionBackwardData(env.h, &alpha, wd, dw, yd, ddy, cd, dp[i].algo, ws, ws_bytes, &beta_half, xd, dgx));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    for (size_t j = 0; j < nx; j++) want[j] = alpha * bwd_data[j] + 0.5 * hprev_x[j];
    expect_close("cudnnConvolutionBackwardData dx (beta 0.5)", download(dgx, nx), want);
    CUDA_OK(cudaFree(dgx));
    if (ws) CUDA_OK(cudaFree(ws));
  }
  for (int i = 0; i < nwp; i++) {
    if (wp[i].status != CUDNN_STATUS_SUCCESS) continue;
    size_t ws_bytes = 12345;
    DNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(env.h, xd, yd, cd, wd, wp[i].algo, &ws_bytes));
    CHECK(ws_bytes == wp[i].memory);
    void *ws = nullptr;
    if (ws_bytes) CUDA_OK(cudaMalloc(&ws, ws_bytes));
    float *dgw = device_floats(nw);
    DNN_OK(cudnnConvolutionBackwardFilter(env.h, &alpha, xd, dx, yd, ddy, cd, wp[i].algo, ws, ws_bytes, &zero, wd, dgw));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    std::vector<double> want(nw);
    for (size_t j = 0; j < nw; j++) want[j] = alpha * bwd_filter[j];
    expect_close("cudnnConvolutionBackwardFilter dw (beta 0)", download(dgw, nw), want);
    CUDA_OK(cudaMemcpy(dgw, hprev_w.data(), nw * sizeof(float), cudaMemcpyHostToDevice));
    DNN_OK(cudnnConvolutionBackwardFilter(env.h, &alpha, xd, dx, yd, ddy, cd, wp[i].algo, ws, ws_bytes, &beta_half, wd,
                                          dgw));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    for (size_t j = 0; j < nw; j++) want[j] = alpha * bwd_filter[j] + 0.5 * hprev_w[j];
    expect_close("cudnnConvolutionBackwardFilter dw (beta 0.5)", download(dgw, nw), want);
    CUDA_OK(cudaFree(dgw));
    if (ws) CUDA_OK(cudaFree(ws));
  }
  float *dgb = device_floats(static_cast<size_t>(oc));
  DNN_OK(cudnnConvolutionBackwardBias(env.h, &alpha, yd, ddy, &zero, bd, dgb));
  CUDA_OK(cudaStreamSynchronize(env.stream));
  std::vector<double> want(static_cast<size_t>(oc));
  for (int j = 0; j < oc; j++) want[static_cast<size_t>(j)] = alpha * bwd_bias[static_cast<size_t>(j)];
  expect_close("cudnnConvolutionBackwardBias db", download(dgb, static_cast<size_t>(oc)), want);
  CUDA_OK(cudaFree(dgb));
  for (float *p : {dx, dw, ddy, dbias}) CUDA_OK(cudaFree(p));
  DNN_OK(cudnnDestroyTensorDescriptor(xd));
  DNN_OK(cudnnDestroyTensorDescriptor(yd));
  DNN_OK(cudnnDestroyTensorDescriptor(bd));
  DNN_OK(cudnnDestroyFilterDescriptor(wd));
  DNN_OK(cudnnDestroyConvolutionDescriptor(cd));
}

void cudnn_results(const Dnn &env) {
  const ConvCase cases[] = {
      {2, 3, 7, 7, 4, 3, 3, 1, 1, 1, CUDNN_CROSS_CORRELATION}, {1, 2, 8, 9, 3, 3, 2, 0, 2, 1, CUDNN_CONVOLUTION},
      {3, 1, 6, 5, 2, 2, 2, 2, 2, 2, CUDNN_CROSS_CORRELATION}, {2, 4, 5, 5, 5, 1, 1, 0, 1, 1, CUDNN_CONVOLUTION},
      {2, 3, 9, 8, 4, 3, 3, 1, 2, 1, CUDNN_CONVOLUTION},       {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, CUDNN_CROSS_CORRELATION}};
  uint64_t seed = 1000;
  for (const ConvCase &cc : cases) check_conv(env, cc, seed += 10);
  printf("ok   cuDNN forward (IMPLICIT_GEMM, GEMM), backward data (ALGO_1, ALGO_0), backward filter (ALGO_1, "
         "ALGO_0), backward bias, cudnnAddTensor: %zu shapes, pad 0..2, stride 1..2, dilation 1..2, both modes, "
         "beta 0 and 0.5\n",
         sizeof cases / sizeof cases[0]);
}

// The math types: one convolution's forward, backward data and backward filter under each. FMA gives the
// fp32 result; DEFAULT, TENSOR_OP and TENSOR_OP_ALLOW_CONVERSION the result of TF32-rounded inputs
// (compute capability 8.0), which the fp32 reference fails.
void cudnn_math_types(const Dnn &env) {
  const ConvCase cc{2, 3, 6, 6, 4, 3, 3, 0, 1, 1, CUDNN_CROSS_CORRELATION};
  const int oh = 4, ow = 4;
  const ConvRef ref{cc, oh, ow};
  const size_t nx = 2 * 3 * 36, nw = 4 * 3 * 9, ny = 2 * 4 * 16;
  const std::vector<float> hx = randoms(nx, 77), hw = randoms(nw, 78), hy = randoms(ny, 79);
  std::vector<float> rx(nx), rw(nw), ry(ny);
  for (size_t i = 0; i < nx; i++) rx[i] = t_tf32(hx[i]);
  for (size_t i = 0; i < nw; i++) rw[i] = t_tf32(hw[i]);
  for (size_t i = 0; i < ny; i++) ry[i] = t_tf32(hy[i]);
  // references [0] fp32, [1] TF32 inputs
  std::vector<double> fwd[2], bd[2], bf[2];
  for (int t = 0; t < 2; t++) {
    fwd[t].assign(ny, 0.0), bd[t].assign(nx, 0.0), bf[t].assign(nw, 0.0);
    const std::vector<float> &x = t ? rx : hx, &w = t ? rw : hw, &y = t ? ry : hy;
    ref.each([&](size_t xi, size_t wi, size_t yi) {
      fwd[t][yi] += static_cast<double>(x[xi]) * w[wi];
      bd[t][xi] += static_cast<double>(y[yi]) * w[wi];
      bf[t][wi] += static_cast<double>(y[yi]) * x[xi];
    });
  }
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  DNN_OK(cudnnCreateTensorDescriptor(&xd));
  DNN_OK(cudnnCreateTensorDescriptor(&yd));
  DNN_OK(cudnnCreateFilterDescriptor(&wd));
  DNN_OK(cudnnCreateConvolutionDescriptor(&cd));
  DNN_OK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 6, 6));
  DNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 4, 4));
  DNN_OK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3));
  DNN_OK(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  cudnnMathType_t mt = CUDNN_FMA_MATH;
  DNN_OK(cudnnGetConvolutionMathType(cd, &mt));
  CHECK(mt == CUDNN_DEFAULT_MATH); // a new descriptor's
  DNN_EXPECT(cudnnSetConvolutionMathType(cd, static_cast<cudnnMathType_t>(4)), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetConvolutionMathType(nullptr, CUDNN_FMA_MATH), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnGetConvolutionMathType(cd, nullptr), CUDNN_STATUS_BAD_PARAM);
  float *dx = upload(hx), *dw = upload(hw), *ddy = upload(hy), *y = device_floats(ny), *gx = device_floats(nx),
        *gw = device_floats(nw);
  void *ws;
  CUDA_OK(cudaMalloc(&ws, nw * sizeof(float)));
  const float one = 1.0f, zero = 0.0f;
  auto max_err = [](const std::vector<float> &got, const std::vector<double> &want) {
    double e = 0.0;
    for (size_t i = 0; i < want.size(); i++)
      e = std::max(e, std::fabs(got[i] - want[i]) / (1.0 + std::fabs(want[i])));
    return e;
  };
  for (cudnnMathType_t m : {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION}) {
    DNN_OK(cudnnSetConvolutionMathType(cd, m));
    DNN_OK(cudnnGetConvolutionMathType(cd, &mt));
    CHECK(mt == m);
    DNN_OK(cudnnConvolutionForward(env.h, &one, xd, dx, wd, dw, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                                   &zero, yd, y));
    DNN_OK(cudnnConvolutionBackwardData(env.h, &one, wd, dw, yd, ddy, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, nullptr, 0,
                                        &zero, xd, gx));
    DNN_OK(cudnnConvolutionBackwardFilter(env.h, &one, xd, dx, yd, ddy, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, ws,
                                          nw * sizeof(float), &zero, wd, gw));
    CUDA_OK(cudaStreamSynchronize(env.stream));
    const int t = m == CUDNN_FMA_MATH ? 0 : 1;
    const std::vector<float> gy = download(y, ny), gdx = download(gx, nx), gdw = download(gw, nw);
    // the right reference within float summation error; the other one off by TF32 rounding (~2^-11)
    CHECK(max_err(gy, fwd[t]) < 1e-5 && max_err(gdx, bd[t]) < 1e-5 && max_err(gdw, bf[t]) < 1e-5);
    CHECK(max_err(gy, fwd[1 - t]) > 1e-4 && max_err(gdx, bd[1 - t]) > 1e-4 && max_err(gdw, bf[1 - t]) > 1e-4);
  }
  for (float *p : {dx, dw, ddy, y, gx, gw}) CUDA_OK(cudaFree(p));
  CUDA_OK(cudaFree(ws));
  DNN_OK(cudnnDestroyTensorDescriptor(xd));
  DNN_OK(cudnnDestroyTensorDescriptor(yd));
  DNN_OK(cudnnDestroyFilterDescriptor(wd));
  DNN_OK(cudnnDestroyConvolutionDescriptor(cd));
  printf("ok   cuDNN math types: FMA_MATH computes fp32; DEFAULT, TENSOR_OP and TENSOR_OP_ALLOW_CONVERSION round "
         "x, w and dy to TF32 (compute capability 8.0); the math type survives cudnnSetConvolution2dDescriptor\n");
}

void cudnn_errors(const Dnn &env) {
  cudnnTensorDescriptor_t xd, yd, bd, unset;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  DNN_OK(cudnnCreateTensorDescriptor(&xd));
  DNN_OK(cudnnCreateTensorDescriptor(&yd));
  DNN_OK(cudnnCreateTensorDescriptor(&bd));
  DNN_OK(cudnnCreateTensorDescriptor(&unset));
  DNN_OK(cudnnCreateFilterDescriptor(&wd));
  DNN_OK(cudnnCreateConvolutionDescriptor(&cd));
  DNN_EXPECT(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 3, 8, 8), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, -3, 8, 8), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetTensor4dDescriptor(xd, static_cast<cudnnTensorFormat_t>(9), CUDNN_DATA_FLOAT, 2, 3, 8, 8),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 8, 8), CUDNN_STATUS_NOT_SUPPORTED);
  DNN_EXPECT(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_DOUBLE, 2, 3, 8, 8), CUDNN_STATUS_NOT_SUPPORTED);
  DNN_EXPECT(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 65536, 1024, 64, 1),
             CUDNN_STATUS_NOT_SUPPORTED); // more than 2^31 - 1 elements
  DNN_OK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 8, 8));
  DNN_EXPECT(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 0, 3), CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 3, 3));
  DNN_EXPECT(cudnnSetConvolution2dDescriptor(cd, -1, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetConvolution2dDescriptor(cd, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 0, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, static_cast<cudnnConvolutionMode_t>(5),
                                             CUDNN_DATA_FLOAT),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CONVOLUTION, CUDNN_DATA_HALF),
             CUDNN_STATUS_NOT_SUPPORTED);
  int n, c, h, w;
  DNN_EXPECT(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &h, &w), CUDNN_STATUS_BAD_PARAM); // cd not set
  DNN_OK(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  DNN_OK(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, &h, &w));
  CHECK(n == 2 && c == 4 && h == 8 && w == 8);
  DNN_EXPECT(cudnnGetConvolution2dForwardOutputDim(cd, xd, wd, &n, &c, nullptr, &w), CUDNN_STATUS_BAD_PARAM);
  cudnnFilterDescriptor_t wrong_c, too_big;
  DNN_OK(cudnnCreateFilterDescriptor(&wrong_c));
  DNN_OK(cudnnCreateFilterDescriptor(&too_big));
  DNN_OK(cudnnSetFilter4dDescriptor(wrong_c, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 2, 3, 3));
  DNN_OK(cudnnSetFilter4dDescriptor(too_big, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, 3, 11, 3));
  DNN_EXPECT(cudnnGetConvolution2dForwardOutputDim(cd, xd, wrong_c, &n, &c, &h, &w), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnGetConvolution2dForwardOutputDim(cd, xd, too_big, &n, &c, &h, &w), CUDNN_STATUS_BAD_PARAM);

  float *x = device_floats(2 * 3 * 8 * 8), *wt = device_floats(4 * 3 * 3 * 3), *y = device_floats(2 * 4 * 8 * 8);
  float *b = device_floats(4);
  void *ws = nullptr;
  CUDA_OK(cudaMalloc(&ws, 4 * 3 * 3 * 3 * sizeof(float)));
  const float one = 1.0f, zero = 0.0f;
  DNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 7, 8)); // wrong height
  DNN_EXPECT(cudnnConvolutionForward(env.h, &one, xd, x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr,
                                     0, &zero, yd, y),
             CUDNN_STATUS_NOT_SUPPORTED); // output size is not the forward output size
  DNN_EXPECT(cudnnConvolutionBackwardData(env.h, &one, wd, wt, yd, y, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, nullptr, 0,
                                          &zero, xd, x),
             CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 5, 8, 8)); // wrong channels
  DNN_EXPECT(cudnnConvolutionForward(env.h, &one, xd, x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr,
                                     0, &zero, yd, y),
             CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 8, 8));
  DNN_EXPECT(cudnnConvolutionForward(env.h, nullptr, xd, x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                     nullptr, 0, &zero, yd, y),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnConvolutionForward(env.h, &one, xd, nullptr, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                     nullptr, 0, &zero, yd, y),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnConvolutionForward(env.h, &one, unset, x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                     nullptr, 0, &zero, yd, y),
             CUDNN_STATUS_BAD_PARAM); // descriptor never set
  DNN_EXPECT(cudnnConvolutionForward(env.h, &one, xd, x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_FFT, nullptr, 0, &zero,
                                     yd, y),
             CUDNN_STATUS_NOT_SUPPORTED);
  size_t need = 0;
  DNN_OK(cudnnGetConvolutionForwardWorkspaceSize(env.h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, &need));
  CHECK(need == 3 * 3 * 3 * 8 * 8 * sizeof(float));
  DNN_EXPECT(cudnnGetConvolutionForwardWorkspaceSize(env.h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, &need),
             CUDNN_STATUS_NOT_SUPPORTED);
  DNN_EXPECT(cudnnConvolutionForward(env.h, &one, xd, x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, ws, 16, &zero, yd,
                                     y),
             CUDNN_STATUS_BAD_PARAM); // workspace too small
  DNN_OK(cudnnGetConvolutionBackwardFilterWorkspaceSize(env.h, xd, yd, cd, wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                                                        &need));
  CHECK(need == 4 * 3 * 3 * 3 * sizeof(float));
  DNN_EXPECT(cudnnConvolutionBackwardFilter(env.h, &one, xd, x, yd, y, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, ws,
                                            need - 4, &zero, wd, wt),
             CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnConvolutionBackwardFilter(env.h, &one, xd, x, yd, y, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, nullptr,
                                            need, &zero, wd, wt),
             CUDNN_STATUS_BAD_PARAM);
  cudnnConvolutionFwdAlgoPerf_t perf[3];
  int got = -1;
  DNN_EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(env.h, xd, wd, cd, yd, 0, &got, perf), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnGetConvolutionForwardAlgorithm_v7(env.h, xd, wd, cd, yd, 1, nullptr, perf), CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(env.h, xd, wd, cd, yd, 1, &got, perf));
  CHECK(got == 1 && perf[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
  DNN_OK(cudnnGetConvolutionForwardAlgorithm_v7(env.h, xd, wd, cd, yd, 3, &got, perf));
  CHECK(got == 3 && perf[2].status == CUDNN_STATUS_NOT_SUPPORTED); // an algorithm that does not run: check .status
  DNN_OK(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 1, 2));
  DNN_EXPECT(cudnnConvolutionBackwardBias(env.h, &one, yd, y, &zero, bd, b), CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 3, 1, 1));
  DNN_EXPECT(cudnnConvolutionBackwardBias(env.h, &one, yd, y, &zero, bd, b), CUDNN_STATUS_BAD_PARAM);
  DNN_EXPECT(cudnnAddTensor(env.h, &one, bd, b, &one, yd, y), CUDNN_STATUS_BAD_PARAM); // 3 channels vs 4
  DNN_EXPECT(cudnnAddTensor(nullptr, &one, bd, b, &one, yd, y), CUDNN_STATUS_BAD_PARAM);
  cudaStream_t dead;
  CUDA_OK(cudaStreamCreate(&dead));
  CUDA_OK(cudaStreamDestroy(dead));
  DNN_EXPECT(cudnnSetStream(env.h, dead), CUDNN_STATUS_BAD_PARAM);
  CHECK(strcmp(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM), "CUDNN_STATUS_BAD_PARAM") == 0);
  CUDA_OK(cudaGetLastError());
  printf("ok   cuDNN statuses: BAD_PARAM (dimensions, enums, NULLs, unset descriptors, channels, filter larger "
         "than input, workspace, bias shape), NOT_SUPPORTED (layouts, types, algorithms, output size)\n");

  // the non-deterministic algorithm sums in a seed-dependent order; the deterministic one does not
  {
    cudnnTensorDescriptor_t bx, by;
    DNN_OK(cudnnCreateTensorDescriptor(&bx));
    DNN_OK(cudnnCreateTensorDescriptor(&by));
    DNN_OK(cudnnSetTensor4dDescriptor(bx, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 16, 3, 8, 8));
    DNN_OK(cudnnSetTensor4dDescriptor(by, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 16, 4, 8, 8));
    float *lx = upload(randoms(16 * 3 * 8 * 8, 77)), *ly = upload(randoms(16 * 4 * 8 * 8, 78));
    std::vector<float> first0, first1;
    int differ0 = 0, differ1 = 0;
    for (int seed = 1; seed <= kSeeds; seed++) {
      hs_emu_set_seed(seed);
      DNN_OK(cudnnConvolutionBackwardFilter(env.h, &one, bx, lx, by, ly, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, nullptr,
                                            0, &zero, wd, wt));
      CUDA_OK(cudaStreamSynchronize(env.stream));
      const std::vector<float> r0 = download(wt, 4 * 3 * 3 * 3);
      DNN_OK(cudnnConvolutionBackwardFilter(env.h, &one, bx, lx, by, ly, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, ws,
                                            need, &zero, wd, wt));
      CUDA_OK(cudaStreamSynchronize(env.stream));
      const std::vector<float> r1 = download(wt, 4 * 3 * 3 * 3);
      if (seed == 1) {
        first0 = r0;
        first1 = r1;
      }
      differ0 += memcmp(r0.data(), first0.data(), r0.size() * sizeof(float)) != 0;
      differ1 += memcmp(r1.data(), first1.data(), r1.size() * sizeof(float)) != 0;
    }
    CHECK(differ0 >= 1 && differ1 == 0);
    printf("ok   BWD_FILTER_ALGO_0 (non-deterministic) changes bits under %d of %d seeds; ALGO_1 never\n", differ0,
           kSeeds);
    CUDA_OK(cudaFree(lx));
    CUDA_OK(cudaFree(ly));
    DNN_OK(cudnnDestroyTensorDescriptor(bx));
    DNN_OK(cudnnDestroyTensorDescriptor(by));
  }

  static float host_x[2 * 3 * 8 * 8];
  expect_death("cudnnConvolutionForward with x in host memory", [&] {
    cudnnConvolutionForward(env.h, &one, xd, host_x, wd, wt, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0,
                            &zero, yd, y);
  }, SIGABRT, {"cudnnConvolutionForward: x at", "host memory, not device memory"});
  for (float *p : {x, wt, y, b}) CUDA_OK(cudaFree(p));
  CUDA_OK(cudaFree(ws));
  for (cudnnTensorDescriptor_t t : {xd, yd, bd, unset}) DNN_OK(cudnnDestroyTensorDescriptor(t));
  for (cudnnFilterDescriptor_t f : {wd, wrong_c, too_big}) DNN_OK(cudnnDestroyFilterDescriptor(f));
  DNN_OK(cudnnDestroyConvolutionDescriptor(cd));
}

void cudnn_tests() {
  Dnn env;
  DNN_EXPECT(cudnnCreate(nullptr), CUDNN_STATUS_BAD_PARAM);
  DNN_OK(cudnnCreate(&env.h));
  CUDA_OK(cudaStreamCreateWithFlags(&env.stream, cudaStreamNonBlocking));
  DNN_OK(cudnnSetStream(env.h, env.stream));
  cudaStream_t s = nullptr;
  DNN_OK(cudnnGetStream(env.h, &s));
  CHECK(s == env.stream);
  cudnn_results(env);
  cudnn_math_types(env);
  cudnn_errors(env);
  DNN_OK(cudnnDestroy(env.h));
  DNN_EXPECT(cudnnDestroy(env.h), CUDNN_STATUS_BAD_PARAM);
  CUDA_OK(cudaStreamDestroy(env.stream));
}

// ==== NCCL on one rank ==================================================================================

ncclComm_t make_comm() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, 1, id, 0));
  return comm;
}

void nccl_one_rank() {
  ncclUniqueId a, b;
  NCCL_OK(ncclGetUniqueId(&a));
  NCCL_OK(ncclGetUniqueId(&b));
  CHECK(memcmp(&a, &b, sizeof a) != 0); // a new id at every call
  NCCL_EXPECT(ncclGetUniqueId(nullptr), ncclInvalidArgument);
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, 1, a, 0));
  int count = 0, rank = -1;
  NCCL_OK(ncclCommCount(comm, &count));
  NCCL_OK(ncclCommUserRank(comm, &rank));
  CHECK(count == 1 && rank == 0);
  int version = 0;
  NCCL_OK(ncclGetVersion(&version));
  CHECK(version >= 21900);

  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int n = 1000;
  std::vector<float> h(n);
  for (int i = 0; i < n; i++) h[static_cast<size_t>(i)] = 0.5f * i - 3.0f;
  float *x = upload(h), *y = device_floats(n);
  for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
    NCCL_OK(ncclAllReduce(x, y, n, ncclFloat32, op, comm, s)); // one rank: y = x
    CUDA_OK(cudaStreamSynchronize(s));
    CHECK(download(y, n) == h);
  }
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, comm, s)); // in place
  NCCL_OK(ncclBroadcast(x, y, n, ncclFloat32, 0, comm, s));
  NCCL_OK(ncclGroupEnd());
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(download(x, n) == h && download(y, n) == h);
  double *d = nullptr;
  CUDA_OK(cudaMalloc(&d, 16 * sizeof(double)));
  const std::vector<double> hd = {1.5, -2.25, 1e300, 4.0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7.0};
  CUDA_OK(cudaMemcpy(d, hd.data(), 16 * sizeof(double), cudaMemcpyHostToDevice));
  NCCL_OK(ncclAllReduce(d, d, 16, ncclFloat64, ncclSum, comm, s));
  std::vector<double> hd2(16);
  CUDA_OK(cudaStreamSynchronize(s)); // s is non-blocking: the legacy-stream copy would not wait for it
  CUDA_OK(cudaMemcpy(hd2.data(), d, 16 * sizeof(double), cudaMemcpyDeviceToHost));
  CHECK(hd2 == hd);
  NCCL_OK(ncclAllReduce(x, y, 0, ncclFloat32, ncclSum, comm, s)); // count 0: nothing
  printf("ok   NCCL on 1 rank: unique ids, ncclCommInitRank / Count / UserRank, ncclAllReduce (sum, prod, max, min, "
         "avg; float32, float64; in place), ncclBroadcast, ncclGroupStart / End\n");

  // statuses
  static float host[8];
  NCCL_EXPECT(ncclAllReduce(x, y, n, ncclNumTypes, ncclSum, comm, s), ncclInvalidArgument);
  NCCL_EXPECT(ncclAllReduce(x, y, n, static_cast<ncclDataType_t>(-1), ncclSum, comm, s), ncclInvalidArgument);
  NCCL_EXPECT(ncclAllReduce(x, y, n, ncclFloat32, static_cast<ncclRedOp_t>(99), comm, s), ncclInvalidArgument);
  NCCL_EXPECT(ncclAllReduce(host, y, 8, ncclFloat32, ncclSum, comm, s), ncclInvalidArgument);
  CHECK(strstr(ncclGetLastError(comm), "not a device pointer") != nullptr);
  NCCL_EXPECT(ncclAllReduce(x, nullptr, n, ncclFloat32, ncclSum, comm, s), ncclInvalidArgument);
  NCCL_EXPECT(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, nullptr, s), ncclInvalidArgument);
  NCCL_EXPECT(ncclBroadcast(x, y, n, ncclFloat32, 1, comm, s), ncclInvalidArgument);
  cudaStream_t dead;
  CUDA_OK(cudaStreamCreate(&dead));
  CUDA_OK(cudaStreamDestroy(dead));
  NCCL_EXPECT(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, comm, dead), ncclUnhandledCudaError);
  NCCL_EXPECT(ncclGroupEnd(), ncclInvalidUsage);
  NCCL_EXPECT(ncclCommCount(comm, nullptr), ncclInvalidArgument);
  CHECK(strcmp(ncclGetErrorString(ncclInvalidArgument), "invalid argument") == 0);
  ncclUniqueId zero_id;
  memset(&zero_id, 0, sizeof zero_id);
  ncclComm_t other = nullptr;
  NCCL_EXPECT(ncclCommInitRank(&other, 1, zero_id, 0), ncclInvalidArgument); // not from ncclGetUniqueId
  NCCL_EXPECT(ncclCommInitRank(&other, 2, b, 0), ncclInvalidArgument);       // nranks is not the world size
  NCCL_EXPECT(ncclCommInitRank(&other, 1, a, 0), ncclInvalidUsage);          // id already used
  CHECK(strstr(ncclGetLastError(nullptr), "already used") != nullptr);
  printf("ok   NCCL statuses: ncclInvalidArgument (type, op, host or NULL buffer, comm, root, id not made by "
         "ncclGetUniqueId, nranks), ncclUnhandledCudaError (stream), ncclInvalidUsage (group, reused id)\n");

  // ncclCommAbort drops queued collectives; ncclCommDestroy flushes them
  ncclComm_t doomed = make_comm();
  CUDA_OK(cudaMemset(y, 0xFF, n * sizeof(float)));
  CUDA_OK(cudaDeviceSynchronize());
  NCCL_OK(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, doomed, s));
  NCCL_OK(ncclCommAbort(doomed));
  CUDA_OK(cudaStreamSynchronize(s));
  CHECK(std::isnan(download(y, n)[0]));
  NCCL_EXPECT(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, doomed, s), ncclInvalidArgument);
  NCCL_OK(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, comm, s));
  NCCL_OK(ncclCommDestroy(comm)); // runs the queued all-reduce first
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  CHECK(download(y, n) == h);
  NCCL_EXPECT(ncclCommDestroy(comm), ncclInvalidArgument);
  NCCL_EXPECT(ncclCommUserRank(comm, &rank), ncclInvalidArgument);
  printf("ok   ncclCommAbort drops queued collectives; ncclCommDestroy runs them first; destroyed handles are "
         "ncclInvalidArgument\n");
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaFree(d));
  CUDA_OK(cudaStreamDestroy(s));
}

// CAUGHT: a kernel writes the buffer on the compute stream and ncclAllReduce reads it on the NCCL
// stream without cudaEventRecord + cudaStreamWaitEvent: the all-reduce runs first under some seed
void nccl_missing_event() {
  ncclComm_t comm = make_comm();
  const int n = 1000;
  float *x = device_floats(n), *y = device_floats(n);
  cudaStream_t compute, comm_stream;
  CUDA_OK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
  cudaEvent_t produced;
  CUDA_OK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
  int wrong_without = 0, wrong_with = 0;
  for (int seed = 1; seed <= kSeeds; seed++) {
    hs_emu_set_seed(seed);
    const float base = static_cast<float>(10 * seed);
    st_produce(x, n, base, compute);
    NCCL_OK(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, comm, comm_stream)); // BUG: no event
    CUDA_OK(cudaStreamSynchronize(comm_stream));
    std::vector<float> h = download(y, n);
    wrong_without += h[n - 1] != base + n - 1;
    CUDA_OK(cudaDeviceSynchronize());

    st_produce(x, n, base + 1.0f, compute);
    CUDA_OK(cudaEventRecord(produced, compute));
    CUDA_OK(cudaStreamWaitEvent(comm_stream, produced, 0));
    NCCL_OK(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, comm, comm_stream));
    CUDA_OK(cudaStreamSynchronize(comm_stream));
    h = download(y, n);
    wrong_with += h[n - 1] != base + 1.0f + n - 1;
    CUDA_OK(cudaDeviceSynchronize());
  }
  CHECK(wrong_without >= 1 && wrong_with == 0);
  printf("ok   missing event between the compute stream and the NCCL stream: wrong under %d of %d seeds; with "
         "cudaEventRecord + cudaStreamWaitEvent: right under all\n",
         wrong_without, kSeeds);
  NCCL_OK(ncclCommDestroy(comm));
  CUDA_OK(cudaEventDestroy(produced));
  CUDA_OK(cudaStreamDestroy(compute));
  CUDA_OK(cudaStreamDestroy(comm_stream));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
}

// ==== NCCL across ranks (mpirun -n 3 ... --ranks) ========================================================

// Bits of a positive normal value exactly representable in the 16-bit format.
uint16_t exact16(float f, bool bf16) {
  if (bf16) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    CHECK((u & 0xffffu) == 0);
    return static_cast<uint16_t>(u >> 16);
  }
  int e;
  const double fr = std::frexp(static_cast<double>(f), &e); // f = fr·2^e, fr in [0.5, 1)
  const double mant = (2.0 * fr - 1.0) * 1024.0;
  CHECK(mant == std::floor(mant) && e - 1 + 15 > 0 && e - 1 + 15 < 31);
  return static_cast<uint16_t>(((e - 1 + 15) << 10) | static_cast<int>(mant));
}

// float16 and bfloat16 sums across ranks: exact sums stay exact; a sum that falls on a tie rounds to
// even (3 ranks: 3·(1 + ulp) = 3 + 1.5 units of [2, 4): to 3 + 2 units, not 3 + 1).
void nccl_ranks_16bit(ncclComm_t comm, cudaStream_t s, int rank, int size) {
  const int n = 1000;
  for (bool bf16 : {false, true}) {
    const ncclDataType_t t = bf16 ? ncclBfloat16 : ncclFloat16;
    const float unit = bf16 ? 0x1p-7f : 0x1p-10f; // ulp at 1
    std::vector<uint16_t> h(n), tie(n, exact16(1.0f + unit, bf16));
    for (int i = 0; i < n; i++) h[static_cast<size_t>(i)] = exact16(static_cast<float>(rank + 1) + 0.25f * static_cast<float>(i % 7), bf16);
    uint16_t *x = nullptr, *y = nullptr;
    CUDA_OK(cudaMalloc(&x, n * sizeof(uint16_t)));
    CUDA_OK(cudaMalloc(&y, n * sizeof(uint16_t)));
    CUDA_OK(cudaMemcpy(x, h.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(y, tie.data(), n * sizeof(uint16_t), cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllReduce(x, x, n, t, ncclSum, comm, s));
    NCCL_OK(ncclAllReduce(y, y, n, t, ncclSum, comm, s));
    CUDA_OK(cudaStreamSynchronize(s));
    std::vector<uint16_t> hx(n), hy(n);
    CUDA_OK(cudaMemcpy(hx.data(), x, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hy.data(), y, n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
    const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
    for (int i = 0; i < n; i++) {
      CHECK(hx[static_cast<size_t>(i)] == exact16(ranks_sum + static_cast<float>(size) * 0.25f * static_cast<float>(i % 7), bf16));
      if (size == 3) CHECK(hy[static_cast<size_t>(i)] == exact16(3.0f + 4.0f * unit, bf16));
    }
    CUDA_OK(cudaFree(x));
    CUDA_OK(cudaFree(y));
  }
  if (rank == 0)
    printf("ok   NCCL on %d ranks: ncclAllReduce sum of float16 and bfloat16: exact sums, ties to even\n", size);
}

void nccl_ranks() {
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CHECK(size >= 2);
  int gpus = 0;
  CUDA_OK(cudaGetDeviceCount(&gpus));
  CHECK(gpus >= size); // test_emu_nccl.sh: a node of one GPU per rank (HS_CUDA_EMU_DEVICES)

  // CAUGHT: every rank on GPU 0 (more ranks than GPUs, each taking device 0): NCCL 2.28 refuses the
  // communicator on every rank, ncclInvalidUsage, "Duplicate GPU detected" naming the ranks and the bus
  ncclUniqueId dup_id;
  if (rank == 0) NCCL_OK(ncclGetUniqueId(&dup_id));
  MPI_Bcast(&dup_id, sizeof dup_id, MPI_BYTE, 0, MPI_COMM_WORLD);
  CUDA_OK(cudaSetDevice(0));
  ncclComm_t dup = nullptr;
  NCCL_EXPECT(ncclCommInitRank(&dup, size, dup_id, rank), ncclInvalidUsage);
  char want[96];
  snprintf(want, sizeof want, "Duplicate GPU detected : rank %d and rank %d both on CUDA device 1000", rank,
           rank == 0 ? 1 : 0);
  if (strcmp(ncclGetLastError(nullptr), want) != 0) {
    fprintf(stderr, "rank %d: ncclGetLastError is \"%s\", expected \"%s\"\n", rank, ncclGetLastError(nullptr), want);
    CHECK(false);
  }
  CHECK(dup == nullptr);
  if (rank == 0)
    printf("ok   %d ranks on one GPU: ncclCommInitRank is ncclInvalidUsage on every rank, \"%s\"\n", size, want);

  // one GPU per rank: distinct PCI bus ids ("0000:0R:00.0"), and NCCL accepts the communicator
  CUDA_OK(cudaSetDevice(rank));
  char bus[32], want_bus[32];
  CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, rank));
  snprintf(want_bus, sizeof want_bus, "0000:%02x:00.0", rank + 1);
  CHECK(strcmp(bus, want_bus) == 0);
  ncclUniqueId id;
  if (rank == 0) NCCL_OK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, size, id, rank));
  int count = 0, me = -1;
  NCCL_OK(ncclCommCount(comm, &count));
  NCCL_OK(ncclCommUserRank(comm, &me));
  CHECK(count == size && me == rank);

  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int n = 4099;
  std::vector<float> h(n);
  for (int i = 0; i < n; i++) h[static_cast<size_t>(i)] = static_cast<float>(rank + 1) + 0.25f * static_cast<float>(i % 7);
  float *x = upload(h), *sum = device_floats(n), *mx = device_floats(n), *mn = device_floats(n), *avg = device_floats(n);
  float *noisy = upload(randoms(n, 500 + static_cast<uint64_t>(rank)));
  NCCL_OK(ncclAllReduce(x, sum, n, ncclFloat32, ncclSum, comm, s));
  NCCL_OK(ncclAllReduce(x, mx, n, ncclFloat32, ncclMax, comm, s));
  NCCL_OK(ncclAllReduce(x, mn, n, ncclFloat32, ncclMin, comm, s));
  NCCL_OK(ncclAllReduce(x, avg, n, ncclFloat32, ncclAvg, comm, s));
  NCCL_OK(ncclAllReduce(noisy, noisy, n, ncclFloat32, ncclSum, comm, s));
  double *d = nullptr;
  CUDA_OK(cudaMalloc(&d, 3 * sizeof(double)));
  const double hd[3] = {0.1 * rank, 1.0, -static_cast<double>(rank)};
  CUDA_OK(cudaMemcpy(d, hd, sizeof hd, cudaMemcpyHostToDevice));
  NCCL_OK(ncclAllReduce(d, d, 3, ncclFloat64, ncclSum, comm, s));
  float *bc = device_floats(n);
  NCCL_OK(ncclBroadcast(rank == size - 1 ? x : nullptr, bc, n, ncclFloat32, size - 1, comm, s));
  CUDA_OK(cudaStreamSynchronize(s)); // before any MPI call of the host (the deadlock rule)
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  const std::vector<float> hs = download(sum, n), hmx = download(mx, n), hmn = download(mn, n), hav = download(avg, n);
  const std::vector<float> hbc = download(bc, n);
  for (int i = 0; i < n; i++) {
    const float frac = 0.25f * static_cast<float>(i % 7);
    CHECK(hs[static_cast<size_t>(i)] == ranks_sum + size * frac);
    CHECK(hmx[static_cast<size_t>(i)] == static_cast<float>(size) + frac);
    CHECK(hmn[static_cast<size_t>(i)] == 1.0f + frac);
    CHECK(approx(hav[static_cast<size_t>(i)], (ranks_sum + size * frac) / size, 1e-6));
    CHECK(hbc[static_cast<size_t>(i)] == static_cast<float>(size) + frac);
  }
  double hd2[3];
  CUDA_OK(cudaMemcpy(hd2, d, sizeof hd2, cudaMemcpyDeviceToHost));
  CHECK(std::fabs(hd2[0] - 0.1 * size * (size - 1) / 2) < 1e-12 && hd2[1] == size && hd2[2] == -size * (size - 1) / 2);
  // every rank holds the same bits (reduce to rank 0, then broadcast)
  const std::vector<float> hn = download(noisy, n);
  std::vector<float> root(n);
  if (rank == 0) root = hn;
  MPI_Bcast(root.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD);
  CHECK(memcmp(root.data(), hn.data(), n * sizeof(float)) == 0);
  if (rank == 0)
    printf("ok   NCCL on %d ranks: ncclAllReduce sum / max / min / avg (float32), sum (float64), in place, "
           "ncclBroadcast from rank %d; every rank gets the same bits\n",
           size, size - 1);

  nccl_ranks_16bit(comm, s, rank, size);

  // CAUGHT: a rank that makes its own id instead of receiving rank 0's
  ncclUniqueId id2;
  if (rank == 0) NCCL_OK(ncclGetUniqueId(&id2));
  MPI_Bcast(&id2, sizeof id2, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank == size - 1) NCCL_OK(ncclGetUniqueId(&id2)); // BUG
  ncclComm_t bad = nullptr;
  NCCL_EXPECT(ncclCommInitRank(&bad, size, id2, rank), ncclInvalidArgument);
  char needle[64];
  snprintf(needle, sizeof needle, "rank %d: passed a different ncclUniqueId than rank 0", size - 1);
  CHECK(strstr(ncclGetLastError(nullptr), needle) != nullptr);
  CHECK(bad == nullptr);
  if (rank == 0)
    printf("ok   a rank that made its own ncclUniqueId: ncclCommInitRank is ncclInvalidArgument on every rank, "
           "reported\n");

  NCCL_OK(ncclCommDestroy(comm));
  for (float *p : {x, sum, mx, mn, avg, noisy, bc}) CUDA_OK(cudaFree(p));
  CUDA_OK(cudaFree(d));
  CUDA_OK(cudaStreamDestroy(s));
}

// Run as `HS_CUDA_EMU_DEVICES=0 test_emu_libs --no-device` (main starts it): a machine without a GPU.
void no_device() {
  cublasLtHandle_t lt;
  LT_EXPECT(cublasLtCreate(&lt), CUBLAS_STATUS_NOT_INITIALIZED);
  cudnnHandle_t dnn;
  DNN_EXPECT(cudnnCreate(&dnn), CUDNN_STATUS_NOT_INITIALIZED);
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comm;
  NCCL_EXPECT(ncclCommInitRank(&comm, 1, id, 0), ncclUnhandledCudaError);
}

void run_no_device(const char *self) {
  fflush(stdout);
  const pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    setenv("HS_CUDA_EMU_DEVICES", "0", 1);
    execl(self, self, "--no-device", static_cast<char *>(nullptr));
    _exit(127);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  printf("ok   without a device (HS_CUDA_EMU_DEVICES=0): cublasLtCreate and cudnnCreate are NOT_INITIALIZED, "
         "ncclCommInitRank ncclUnhandledCudaError\n");
}

} // namespace

int main(int argc, char **argv) {
  const bool ranks = argc > 1 && strcmp(argv[1], "--ranks") == 0;
  if (argc > 1 && strcmp(argv[1], "--no-device") == 0) {
    no_device();
    return 0;
  }
  if (!ranks) { // death tests fork: before MPI_Init
    run_no_device(argv[0]);
    cublaslt_tests();
    cudnn_tests();
  }
  MPI_Init(&argc, &argv);
  if (ranks) {
    nccl_ranks();
  } else {
    nccl_one_rank();
    nccl_missing_event();
  }
  MPI_Finalize();
  return 0;
}
