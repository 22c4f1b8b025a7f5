#include "core/cuda/cublaslt_gemm.hpp"

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <utility>
#include <mutex>
#include <tuple>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"

namespace asteria::cuda {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

cudaDataType_t cuda_type(ScalarType t) { return t == ScalarType::F32 ? CUDA_R_32F : CUDA_R_16BF; }

// The shape, types, batch, beta != 0, and the byte alignment of each operand (below).
using PlanKey = std::tuple<bool, bool, int, int, int, int, int, int, int, int, int, int64_t, int64_t, int64_t, bool,
                           uint32_t, uint32_t, uint32_t>;

// The alignment cuBLASLt may assume for an operand: the largest power of two (at most 256) that
// divides its address and, in a batch, its stride in bytes. The heuristic's default assumption
// is 256; a head's view inside a fused qkv row is often aligned to far less.
uint32_t alignment(const void* p, int64_t stride_elems, size_t elem_bytes, int batch) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (batch > 1) bits |= static_cast<uint64_t>(stride_elems) * elem_bytes;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

cublasLtMatrixLayout_t layout(cudaDataType_t type, int rows, int cols, int ld, int batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  ASTERIA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld));
  if (batch > 1) {
    ASTERIA_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    ASTERIA_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  }
  return l;
}

// One per process and device in use; plans live as long as the process (shapes are few).
class LtState {
 public:
  LtState() { ASTERIA_CUBLAS_CHECK(cublasLtCreate(&handle_)); }
  // One workspace per stream: GEMMs on two streams may run at once.
  void* workspace(cudaStream_t s) {
    void*& w = workspaces_[s];
    if (!w) ASTERIA_CUDA_CHECK(cudaMalloc(&w, kWorkspaceBytes));
    return w;
  }
  std::mutex mu;
  cublasLtHandle_t handle_ = nullptr;
  std::map<PlanKey, Plan> plans;

 private:
  std::map<cudaStream_t, void*> workspaces_;
};

LtState& state() {
  static LtState s;   // never destroyed before the last GEMM: the process owns it to the end
  return s;
}

// The column-major problem: D[n, m] = op(B)^T-side operand (B's memory) x op(A)^T-side (A's).
Plan make_plan(LtState& st, const GemmArgs& g, uint32_t align_a, uint32_t align_b, uint32_t align_c) {
  Plan p;
  ASTERIA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;    // B's memory
  const cublasOperation_t second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;   // A's memory
  ASTERIA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first));
  ASTERIA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &second, sizeof second));
  const cudaDataType_t in = cuda_type(g.a_type), out = cuda_type(g.c_type);
  // B row-major [k, n] (or [n, k] transposed) is column-major [n, k] (or [k, n]).
  p.a = g.trans_b ? layout(in, g.k, g.n, g.ldb, g.batch, g.stride_b) : layout(in, g.n, g.k, g.ldb, g.batch, g.stride_b);
  p.b = g.trans_a ? layout(in, g.m, g.k, g.lda, g.batch, g.stride_a) : layout(in, g.k, g.m, g.lda, g.batch, g.stride_a);
  p.c = layout(out, g.n, g.m, g.ldc, g.batch, g.stride_c);
  cublasLtMatmulPreference_t pref = nullptr;
  ASTERIA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kWorkspaceBytes;
  ASTERIA_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // cuBLASLt's A is our B's memory and its B our A's (the column-major view).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
  for (const auto& [attr, value] : aligns)
    ASTERIA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st_h = cublasLtMatmulAlgoGetHeuristic(st.handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  ASTERIA_CHECK(st_h == CUBLAS_STATUS_SUCCESS && found > 0, "cuBLASLt has no algorithm for the GEMM m ", g.m,
                " n ", g.n, " k ", g.k, " (lda ", g.lda, " ldb ", g.ldb, " ldc ", g.ldc, ", batch ", g.batch,
                "): ", cublasGetStatusString(st_h));
  p.algo = result.algo;
  return p;
}

}  // namespace

void lt_gemm(const GemmArgs& g, cudaStream_t s) {
  if (g.m == 0 || g.n == 0) return;
  LtState& st = state();
  const size_t in_bytes = scalar_bytes(g.a_type), out_bytes = scalar_bytes(g.c_type);
  const uint32_t align_a = alignment(g.a, g.stride_a, in_bytes, g.batch);
  const uint32_t align_b = alignment(g.b, g.stride_b, in_bytes, g.batch);
  const uint32_t align_c = alignment(g.c, g.stride_c, out_bytes, g.batch);
  const PlanKey key{g.trans_a,  g.trans_b,  g.m,        g.n,        g.k,       g.lda,   g.ldb,
                    g.ldc,      static_cast<int>(g.a_type), static_cast<int>(g.c_type), g.batch, g.stride_a,
                    g.stride_b, g.stride_c, g.beta != 0, align_a,   align_b, align_c};
  std::lock_guard<std::mutex> lock(st.mu);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) it = st.plans.emplace(key, make_plan(st, g, align_a, align_b, align_c)).first;
  const Plan& p = it->second;
  ASTERIA_CUBLAS_CHECK(cublasLtMatmul(st.handle_, p.op, &g.alpha, g.b, p.a, g.a, p.b, &g.beta, g.c, p.c, g.c, p.c,
                                      &p.algo, st.workspace(s), kWorkspaceBytes, s));
}

namespace {

GemmArgs args(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const void* a, int lda, const void* b,
              int ldb, float beta, float* c, int ldc) {
  GemmArgs g;
  g.trans_a = trans_a, g.trans_b = trans_b, g.m = m, g.n = n, g.k = k, g.alpha = alpha, g.beta = beta;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc;
  return g;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc, int batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  GemmArgs g = args(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  g.batch = batch, g.stride_a = stride_a, g.stride_b = stride_b, g.stride_c = stride_c;
  lt_gemm(g, current_stream());
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const __nv_bfloat16* a, int lda,
          const __nv_bfloat16* b, int ldb, float beta, float* c, int ldc) {
  GemmArgs g = args(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  g.a_type = ScalarType::BF16;
  lt_gemm(g, current_stream());
}

size_t lt_gemm_plans() {
  LtState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.plans.size();
}

}  // namespace asteria::cuda
