#include "model/decoder.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "model/block.hpp"
#include "model/model.hpp"
#include "model/norm.hpp"
#include "model/rope_tables.hpp"
#include "model/ops/op_set.hpp"

namespace asteria {

template <class T, class Ops>
struct Decoder<T, Ops>::Impl {
  template <class U>
  using Array = typename Ops::template Array<U>;
  ModelConfig cfg;
  int context = 0, rows = 0, pos = 0;
  std::vector<ParamTable> tables;
  std::vector<Array<T>> params;            // per layer, its flat buffer
  std::vector<BlockTensors<T>> blocks;
  T* wte = nullptr;
  T* norm_f = nullptr;                     // RMSNorm only
  T* lm_head = nullptr;                    // wte when tied
  std::vector<Array<T>> k_cache, v_cache;  // per block [context, C]
  Array<T> rope_cos, rope_sin;             // [context, hd/2]
  Array<int32_t> tokens;                   // [rows]
  // A pass's rows: the residual x, its copy x1, a norm's output, qkv (and before QK-norm), the
  // attention's output, the post-norm sublayer output, the MLP's up / act, norm statistics.
  Array<T> x, x1, nx, qkv, qkv_raw, atty, sub, up, act, mean, rstd, rstd2, scores, logits;
  std::vector<T> host_logits;

  int C() const { return cfg.d_model; }

  // The attention sublayer of block b on n rows h at positions pos..pos+n-1 -> atty.
  void attention(int b, const BlockTensors<T>& w, const T* h, int n) {
    const int C3 = 3 * C(), NH = cfg.n_heads, hd = cfg.head_dim();
    const GemmPrecision fp32;
    if (cfg.qk_norm) {
      linear_forward_at<Ops>(fp32, qkv_raw.data(), h, w.att_qkv, n, C(), C3, false);
      Ops::rmsnorm_forward(qkv.data(), C3, rstd.data(), qkv_raw.data(), C3, w.q_norm, static_cast<const T*>(nullptr), n,
                           C(), cfg.norm_eps);
      Ops::rmsnorm_forward(qkv.data() + C(), C3, rstd2.data(), qkv_raw.data() + C(), C3, w.k_norm,
                           static_cast<const T*>(nullptr), n, C(), cfg.norm_eps);
      Ops::copy_columns(qkv.data() + 2 * C(), C3, qkv_raw.data() + 2 * C(), C3, n, C());
    } else {
      linear_forward_at<Ops>(fp32, qkv.data(), h, w.att_qkv, n, C(), C3, false);
    }
    // The rows are positions pos..pos+n-1: the tables from row pos, no wrap within the pass.
    const size_t half = static_cast<size_t>(hd / 2);
    Ops::rope_forward(qkv.data(), C3, n, n, 2 * NH, hd, rope_cos.data() + pos * half, rope_sin.data() + pos * half);
    Ops::copy_columns(k_cache[b].data() + static_cast<size_t>(pos) * C(), C(), qkv.data() + C(), C3, n, C());
    Ops::copy_columns(v_cache[b].data() + static_cast<size_t>(pos) * C(), C(), qkv.data() + 2 * C(), C3, n, C());
    Ops::attention_cached_forward(atty.data(), static_cast<const T*>(qkv.data()), C3,
                                  static_cast<const T*>(k_cache[b].data()), static_cast<const T*>(v_cache[b].data()), n,
                                  pos, C(), NH, scores.data());
  }

  // Block b on the n rows of x, in place (block.hpp's equations).
  void block(int b, int n) {
    const BlockTensors<T>& w = blocks[b];
    const int F = cfg.mlp_hidden;
    const size_t nc = static_cast<size_t>(n) * C();
    const GemmPrecision fp32;
    const T* none = nullptr;
    if (cfg.norm_placement == NormPlacement::Pre) {
      norm_forward<Ops>(cfg.norm, nx.data(), mean.data(), rstd.data(), x.data(), w.att_norm, none, n, C(), cfg.norm_eps);
      attention(b, w, nx.data(), n);
      Ops::copy(x1.data(), x.data(), nc);
      linear_forward_at<Ops>(fp32, x1.data(), atty.data(), w.att_out, n, C(), C(), true);   // x1 = x + att
      norm_forward<Ops>(cfg.norm, nx.data(), mean.data(), rstd.data(), x1.data(), w.mlp_norm, none, n, C(), cfg.norm_eps);
      linear_forward_at<Ops>(fp32, up.data(), nx.data(), w.mlp_up, n, C(), 2 * F, false);
      Ops::swiglu_forward(act.data(), up.data(), n, F);
      Ops::copy(x.data(), x1.data(), nc);
      linear_forward_at<Ops>(fp32, x.data(), act.data(), w.mlp_down, n, F, C(), true);     // out = x1 + mlp
    } else {
      attention(b, w, x.data(), n);
      linear_forward_at<Ops>(fp32, sub.data(), atty.data(), w.att_out, n, C(), C(), false);
      norm_forward<Ops>(cfg.norm, x1.data(), mean.data(), rstd.data(), sub.data(), w.att_norm, x.data(), n, C(),
                        cfg.norm_eps);                                                       // x1 = x + norm(att)
      linear_forward_at<Ops>(fp32, up.data(), x1.data(), w.mlp_up, n, C(), 2 * F, false);
      Ops::swiglu_forward(act.data(), up.data(), n, F);
      linear_forward_at<Ops>(fp32, sub.data(), act.data(), w.mlp_down, n, F, C(), false);
      norm_forward<Ops>(cfg.norm, x.data(), mean.data(), rstd.data(), sub.data(), w.mlp_norm, x1.data(), n, C(),
                        cfg.norm_eps);                                                       // out = x1 + norm(mlp)
    }
  }

  // One pass of n <= rows tokens; leaves the last row's logits in host_logits.
  void pass(const int32_t* ids, int n) {
    Ops::to_device(tokens.data(), ids, static_cast<size_t>(n));
    Ops::embedding_forward(x.data(), tokens.data(), static_cast<const T*>(wte), n, C());
    for (int b = 0; b < cfg.n_layers; b++) block(b, n);
    pos += n;
    // The head on the last row only: final norm, then all E rows of the LM head.
    const T* last = x.data() + static_cast<size_t>(n - 1) * C();
    norm_forward<Ops>(cfg.norm, nx.data(), mean.data(), rstd.data(), last, static_cast<const T*>(norm_f),
                      static_cast<const T*>(nullptr), 1, C(), cfg.norm_eps);
    linear_forward_at<Ops>(GemmPrecision{}, logits.data(), nx.data(), static_cast<const T*>(lm_head), 1, C(),
                           cfg.embedding_size, false);
    Ops::to_host(host_logits.data(), logits.data(), host_logits.size());
  }
};

template <class T, class Ops>
Decoder<T, Ops>::Decoder(const ModelConfig& cfg, int context, int max_rows) : impl_(std::make_unique<Impl>()) {
  ASTERIA_CHECK(context >= 1 && max_rows >= 1, "decoder: context (", context, ") and rows (", max_rows,
                ") must be positive");
  Impl& m = *impl_;
  m.cfg = cfg;
  m.context = context;
  m.rows = std::min(max_rows, context);
  m.tables = model_param_tables(cfg);
  const int L = cfg.n_layers, C = cfg.d_model, F = cfg.mlp_hidden, R = m.rows;
  for (const ParamTable& t : m.tables) m.params.emplace_back(t.numel);
  m.wte = m.params[0].data();
  for (int b = 0; b < L; b++) m.blocks.push_back(block_tensors(m.params[b + 1].data(), m.tables[b + 1]));
  for (const ParamEntry& e : m.tables[L + 1].entries) {
    if (e.name == "norm_f") m.norm_f = m.params[L + 1].data() + e.offset;
    if (e.name == "lm_head") m.lm_head = m.params[L + 1].data() + e.offset;
  }
  if (cfg.tied_embeddings) m.lm_head = m.wte;
  for (int b = 0; b < L; b++) {
    m.k_cache.emplace_back(static_cast<size_t>(context) * C);
    m.v_cache.emplace_back(static_cast<size_t>(context) * C);
  }
  make_rope_tables<Ops>(m.rope_cos, m.rope_sin, context, cfg);
  const size_t rc = static_cast<size_t>(R) * C;
  m.tokens.resize(R);
  for (auto* a : {&m.x, &m.x1, &m.nx, &m.atty, &m.sub}) a->resize(rc);
  m.qkv.resize(3 * rc);
  if (cfg.qk_norm) m.qkv_raw.resize(3 * rc);
  m.up.resize(static_cast<size_t>(R) * 2 * F);
  m.act.resize(static_cast<size_t>(R) * F);
  for (auto* a : {&m.mean, &m.rstd, &m.rstd2}) a->resize(R);
  m.scores.resize(static_cast<size_t>(R) * cfg.n_heads * context);
  m.logits.resize(cfg.embedding_size);
  m.host_logits.resize(cfg.embedding_size);
}

template <class T, class Ops>
Decoder<T, Ops>::~Decoder() = default;

template <class T, class Ops>
const ModelConfig& Decoder<T, Ops>::config() const {
  return impl_->cfg;
}
template <class T, class Ops>
int Decoder<T, Ops>::context() const {
  return impl_->context;
}
template <class T, class Ops>
int Decoder<T, Ops>::position() const {
  return impl_->pos;
}

template <class T, class Ops>
size_t Decoder<T, Ops>::bytes() const {
  const Impl& m = *impl_;
  size_t n = 0;
  for (const auto& p : m.params) n += p.size();
  for (const auto& k : m.k_cache) n += 2 * k.size();
  for (const auto* a : {&m.x, &m.x1, &m.nx, &m.qkv, &m.qkv_raw, &m.atty, &m.sub, &m.up, &m.act, &m.scores, &m.logits})
    n += a->size();
  return n * sizeof(T);
}

template <class T, class Ops>
void Decoder<T, Ops>::load(const ParamSource& source) {
  Impl& m = *impl_;
  Buffer<float> host;   // device memory, or a wider T: a layer at a time through the host
  for (size_t l = 0; l < m.tables.size(); l++) {
    const size_t n = m.tables[l].numel;
    if (n == 0) continue;
    if constexpr (Ops::kHostMemory && std::is_same_v<T, float>) {
      source.fill(static_cast<int>(l), 0, n, m.params[l].data());   // straight in: no second copy
      continue;
    }
    if (host.size() < n) host.resize(n);
    source.fill(static_cast<int>(l), 0, n, host.data());
    if constexpr (std::is_same_v<T, float>) {
      Ops::to_device(m.params[l].data(), host.data(), n);
    } else {
      Buffer<T> wide(n);
      std::copy(host.data(), host.data() + n, wide.data());
      Ops::to_device(m.params[l].data(), wide.data(), n);
    }
  }
}

template <class T, class Ops>
void Decoder<T, Ops>::reset() {
  impl_->pos = 0;
}

template <class T, class Ops>
const std::vector<T>& Decoder<T, Ops>::forward(const int32_t* tokens, int n) {
  Impl& m = *impl_;
  ASTERIA_CHECK(n >= 1, "decoder: no tokens to run");
  ASTERIA_CHECK(m.pos + n <= m.context, "decoder: ", m.pos, " + ", n, " positions exceed the context of ", m.context,
                " (the cache's length)");
  for (int i = 0; i < n; i++)
    ASTERIA_CHECK(tokens[i] >= 0 && tokens[i] < m.cfg.embedding_size, "decoder: token id ", tokens[i],
                  " is outside the model's ", m.cfg.embedding_size, " rows");
  for (int done = 0; done < n; done += m.rows) m.pass(tokens + done, std::min(m.rows, n - done));
  return m.host_logits;
}

template class Decoder<float>;
#ifdef ASTERIA_HAVE_CUDA
template class Decoder<float, CudaOps>;
#endif

}  // namespace asteria
