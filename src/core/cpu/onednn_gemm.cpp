#include "core/cpu/onednn_gemm.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <unordered_map>

#include "core/buffer.hpp"
#include "core/error.hpp"

namespace asteria::cpu {

namespace {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// All 4-byte fields, so that no padding enters the comparison and the hash.
struct MatmulKey {
  int trans_a, trans_b;
  int M, N, K, lda, ldb, ldc;
  uint32_t alpha, beta;
  bool operator==(const MatmulKey& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    size_t h = 1469598103934665603ull;
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    for (size_t i = 0; i < sizeof k; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

// One bf16 matmul: its primitive, the memory objects whose data handles each call sets, and
// its scratchpad.
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory a, b, c, scratchpad;
  Buffer<unsigned char> scratch;
};

Matmul make_matmul(const MatmulKey& k) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  // Row-major op(A) [M, K] and op(B) [K, N]: a transposed operand is the same memory read with
  // its strides swapped.
  const dnnl::memory::desc a({k.M, k.K}, dt::bf16, k.trans_a ? dims{1, k.lda} : dims{k.lda, 1});
  const dnnl::memory::desc b({k.K, k.N}, dt::bf16, k.trans_b ? dims{1, k.ldb} : dims{k.ldb, 1});
  const dnnl::memory::desc c({k.M, k.N}, dt::f32, dims{k.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  float alpha, beta;
  std::memcpy(&alpha, &k.alpha, sizeof alpha);
  std::memcpy(&beta, &k.beta, sizeof beta);
  if (alpha != 1.f) attr.set_output_scales(0, {alpha});
  if (beta != 0.f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
  Matmul m{dnnl::matmul(pd), dnnl::memory(a, cpu_engine(), nullptr), dnnl::memory(b, cpu_engine(), nullptr),
           dnnl::memory(c, cpu_engine(), nullptr), {}, {}};
  m.scratch.resize(std::max<size_t>(pd.scratchpad_desc().get_size(), 1));
  m.scratchpad = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), m.scratch.data());
  return m;
}

}  // namespace

OneDnnIsa onednn_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2:
    case dnnl::cpu_isa::avx2_vnni:
      return OneDnnIsa::Avx2;
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
      return OneDnnIsa::Avx512;
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return OneDnnIsa::Avx512Bf16;
    default:
      return OneDnnIsa::None;
  }
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

void onednn_sgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
                  const float* B, int ldb, float beta, float* C, int ldc) {
  const dnnl_status_t s = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                     beta, C, ldc);
  if (s != dnnl_success)
    throw Error("oneDNN sgemm refused " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                " (status " + std::to_string(static_cast<int>(s)) + ")");
}

void onednn_gemm_bf16(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A, int lda,
                      const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  thread_local std::unordered_map<MatmulKey, Matmul, MatmulKeyHash> cache;
  thread_local dnnl::stream stream(cpu_engine());
  const MatmulKey key{int(trans_a), int(trans_b), M, N, K, lda, ldb, ldc, float_bits(alpha), float_bits(beta)};
  auto it = cache.find(key);
  if (it == cache.end()) {
    try {
      it = cache.emplace(key, make_matmul(key)).first;
    } catch (const dnnl::error& e) {
      throw Error("oneDNN has no bf16 matmul for " + std::to_string(M) + "x" + std::to_string(N) + "x" +
                  std::to_string(K) + " on this CPU (" + e.what() + ")");
    }
  }
  Matmul& m = it->second;
  m.a.set_data_handle(const_cast<uint16_t*>(A));
  m.b.set_data_handle(const_cast<uint16_t*>(B));
  m.c.set_data_handle(C);
  m.primitive.execute(stream, {{DNNL_ARG_SRC, m.a}, {DNNL_ARG_WEIGHTS, m.b}, {DNNL_ARG_DST, m.c},
                               {DNNL_ARG_SCRATCHPAD, m.scratchpad}});
}

}  // namespace asteria::cpu
