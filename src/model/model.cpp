// Model<T>: owns the parameter, gradient and activation buffers and wires the layers
// (embedding, blocks, head) in the order model.hpp describes. Everything is allocated in the
// constructor; forward and backward only run kernels.
#include "model/model.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "model/activation_layout.hpp"
#include "model/block.hpp"
#include "model/rope_tables.hpp"
#include "model/head.hpp"
#include "model/init.hpp"
#include "model/ops/op_set.hpp"

namespace asteria {

namespace {

void validate(const ModelConfig& cfg, int batch) {
  ASTERIA_CHECK(batch >= 1, "model: batch must be >= 1 (got ", batch, ")");
  ASTERIA_CHECK(cfg.d_model >= 1 && cfg.n_layers >= 1 && cfg.n_heads >= 1 && cfg.seq_len >= 1 &&
                    cfg.mlp_hidden >= 1 && cfg.vocab_size >= 1,
                "model: d_model, n_layers, n_heads, mlp_hidden, vocab_size and seq_len must all "
                "be >= 1");
  ASTERIA_CHECK(cfg.d_model % cfg.n_heads == 0, "model: d_model (", cfg.d_model,
                ") must be divisible by n_heads (", cfg.n_heads, ")");
  ASTERIA_CHECK(cfg.head_dim() % 2 == 0, "model: head_dim (", cfg.head_dim(),
                ") must be even for RoPE");
  ASTERIA_CHECK(cfg.embedding_size >= cfg.vocab_size, "model: embedding_size (",
                cfg.embedding_size, ") must be >= vocab_size (", cfg.vocab_size, ")");
  ASTERIA_CHECK(cfg.rope_theta > 0, "model: rope_theta must be > 0");
  ASTERIA_CHECK(cfg.norm_eps > 0, "model: norm_eps must be > 0");
  ASTERIA_CHECK(cfg.z_loss >= 0, "model: z_loss must be >= 0");
}

}  // namespace

template <class T, class Ops>
struct Model<T, Ops>::Impl {
  template <class U>
  using Array = typename Ops::template Array<U>;   // host or device memory
  ModelConfig cfg;
  int batch = 0;
  int N = 0;  // batch * seq_len rows
  bool image = false;  // Storage::Image: parameters only
  std::vector<ParamTable> tables;
  std::vector<std::string> names;
  std::vector<Array<T>> params, grads;       // the owned ones (params: Owned, Image; grads: Owned, BoundParams)
  std::vector<T*> param_ptr, grad_ptr;        // layer l's current buffers (null: unbound)
  std::vector<BlockTensors<T>> block_w, block_dw;
  HeadTensors<T> head_w, head_dw;
  T* wte = nullptr;   // [E, C]
  T* dwte = nullptr;  // [E, C]

  Array<int32_t> inputs, targets;  // [N]
  Array<T> residual;               // [L + 1, N, C]: x_0 (embedding) .. x_L (last block)
  BlockActivationLayout block_layout;
  ActivationRecompute recompute;
  bool bf16 = false;                          // runtime.precision bf16 (model.hpp)
  std::vector<Array<T>> kept_acts;           // fp32: one per block that keeps its activations
  Array<T> shared_acts;                      // the recomputed blocks' (bf16: every block's)
  std::vector<T*> block_acts;                 // block i's activations (kept or shared)
  int shared_holds = 0;                       // layer whose activations, as its backward reads
                                              // them, shared_acts holds (0: none)
  BlockStorageLayout packing;                 // bf16: what a kept block packs
  std::vector<int> packed_index;              // bf16: block i's packed buffers (-1: recomputed)
  std::vector<Array<uint16_t>> packed_bf16;   // bf16: per kept block
  std::vector<Array<T>> packed_fp32;
  HeadActivationLayout head_layout;
  Array<T> head_acts;
  ScratchLayout scratch_layout;
  Array<T> scratch;
  Array<T> rope_cos, rope_sin;  // [T, hd/2]
  BlockContext<T> ctx;
  double ce = 0, z = 0;
  // bf16 with owned parameters: each layer's bf16 copy of its parameters (model.hpp), remade
  // before the layer's GEMMs read it whenever params(l) was handed out since (whoever asked may
  // have written through it: the optimizer's step, a restore) - once per step in training.
  std::vector<Array<uint16_t>> weights_bf16;
  std::unique_ptr<std::atomic<bool>[]> copy_stale;
  size_t copies_made = 0;

  // The precision of layer l's GEMMs, its bf16 copy brought up to date first.
  GemmPrecision gemm_of(int l) {
    GemmPrecision g;
    g.bf16 = bf16;
    if constexpr (std::is_same_v<T, float>) {
      if (weights_bf16.empty() || weights_bf16[l].size() == 0) return g;
      if (copy_stale[l].exchange(false)) {
        Ops::pack_bf16(weights_bf16[l].data(), param_ptr[l], tables[l].numel);
        ++copies_made;
      }
      g.weights = {param_ptr[l], weights_bf16[l].data(), tables[l].numel};
    }
    return g;
  }
  // The head's: its LM head is the embedding's weight when tied.
  GemmPrecision head_gemm() { return gemm_of(cfg.tied_embeddings ? 0 : cfg.n_layers + 1); }
  void mark_stale(int l) {
    if (!weights_bf16.empty()) copy_stale[l] = true;
  }

  T* x(int i) { return residual.data() + static_cast<size_t>(i) * N * cfg.d_model; }

  // bf16, after block i's forward (or recompute) in shared_acts: its bf16 tensors rounded there,
  // then, when the block keeps its activations, packed into its own buffers.
  void store_bf16(int i) {
    if constexpr (std::is_same_v<T, float>) {
      T* a = shared_acts.data();
      for (const PackedSpan& p : packing.bf16) Ops::round_to_bf16(p.in_layout.in(a), p.in_layout.in(a), p.in_layout.size);
      const int k = packed_index[i];
      if (k < 0) return;
      for (const PackedSpan& p : packing.bf16) Ops::pack_bf16(packed_bf16[k].data() + p.packed, p.in_layout.in(a), p.in_layout.size);
      for (const PackedSpan& p : packing.fp32) Ops::copy(packed_fp32[k].data() + p.packed, p.in_layout.in(a), p.in_layout.size);
    }
  }
  // bf16, before kept block i's backward: its packed activations widened into shared_acts.
  void load_bf16(int i) {
    if constexpr (std::is_same_v<T, float>) {
      T* a = shared_acts.data();
      const int k = packed_index[i];
      for (const PackedSpan& p : packing.bf16) Ops::unpack_bf16(p.in_layout.in(a), packed_bf16[k].data() + p.packed, p.in_layout.size);
      for (const PackedSpan& p : packing.fp32) Ops::copy(p.in_layout.in(a), packed_fp32[k].data() + p.packed, p.in_layout.size);
    }
  }

  // The views into layer l's parameters (tensor pointers), after a (re)binding. Parameters and
  // gradients have views of their own: a sharded run binds one on the compute lane while the
  // comm lane unbinds the other (release after a backward, beside its reduce_scatter).
  void update_param_views(int l) {
    update_views(l, param_ptr[l], wte, block_w, head_w);
  }
  void update_grad_views(int l) {
    update_views(l, grad_ptr[l], dwte, block_dw, head_dw);
  }
  void update_views(int l, T* base, T*& embedding, std::vector<BlockTensors<T>>& blocks, HeadTensors<T>& head) {
    const int L = cfg.n_layers;
    if (l == 0) {
      embedding = base;
      if (cfg.tied_embeddings) head.lm_head = base;
    } else if (l <= L) {
      blocks[l - 1] = base ? block_tensors(base, tables[l]) : BlockTensors<T>{};
    } else {
      for (const auto& e : tables[l].entries) {
        T* w = base ? base + e.offset : nullptr;
        if (e.name == "norm_f") head.norm_f = w;
        else if (e.name == "lm_head") head.lm_head = w;
      }
    }
  }
};

template <class T, class Ops>
Model<T, Ops>::Model(const ModelConfig& cfg, int batch, Storage storage,
                const ActivationRecompute& recompute, ComputePrecision precision)
    : impl_(std::make_unique<Impl>()) {
  validate(cfg, batch);
  ASTERIA_CHECK(precision != ComputePrecision::Bf16 || (std::is_same_v<T, float>),
                "model: bf16 precision needs a float model");
  Impl& m = *impl_;
  m.cfg = cfg;
  m.batch = batch;
  m.N = batch * cfg.seq_len;
  m.tables = model_param_tables(cfg);
  const int L = cfg.n_layers;
  m.names = model_layer_names(cfg);
  m.param_ptr.assign(m.tables.size(), nullptr);
  m.grad_ptr.assign(m.tables.size(), nullptr);
  m.block_w.resize(L);
  m.block_dw.resize(L);
  m.image = storage == Storage::Image;
  const bool owns_params = storage == Storage::Owned || storage == Storage::Image;
  const bool owns_grads = storage == Storage::Owned || storage == Storage::BoundParams;
  for (const auto& t : m.tables) {
    if (owns_params) m.params.emplace_back(t.numel);
    if (owns_grads) m.grads.emplace_back(t.numel);
  }
  for (size_t l = 0; l < m.tables.size(); l++) {
    if (owns_params) m.param_ptr[l] = m.params[l].data();
    if (owns_grads) m.grad_ptr[l] = m.grads[l].data();
    m.update_param_views(static_cast<int>(l));
    m.update_grad_views(static_cast<int>(l));
  }
  m.recompute = recompute;
  if (m.image) return;   // nothing to run with

  m.inputs.resize(m.N);
  m.targets.resize(m.N);
  m.residual.resize(static_cast<size_t>(L + 1) * m.N * cfg.d_model);
  m.block_layout = block_activation_layout(cfg, batch);
  m.bf16 = precision == ComputePrecision::Bf16;
  m.ctx.gemm.bf16 = m.bf16;
  if (m.bf16 && storage == Storage::Owned) {
    m.copy_stale = std::make_unique<std::atomic<bool>[]>(m.tables.size());
    for (int l = 0; l < static_cast<int>(m.tables.size()); ++l) {
      m.weights_bf16.emplace_back(layer_has_gemm_weights(cfg, l) ? m.tables[l].numel : 0);
      m.copy_stale[l] = true;
    }
  }
  if (m.bf16) {
    m.packing = block_storage_layout(cfg, m.block_layout);
    m.shared_acts.resize(m.block_layout.total);
    for (int i = 0; i < L; i++) {
      m.block_acts.push_back(m.shared_acts.data());
      m.packed_index.push_back(recompute.recomputes(i) ? -1 : static_cast<int>(m.packed_bf16.size()));
      if (recompute.recomputes(i)) continue;
      m.packed_bf16.emplace_back(m.packing.bf16_elems);
      m.packed_fp32.emplace_back(m.packing.fp32_elems);
    }
  } else {
    m.kept_acts.reserve(L);
    for (int i = 0; i < L; i++)
      if (!recompute.recomputes(i)) m.kept_acts.emplace_back(m.block_layout.total);
    if (recompute.recomputed_blocks(L) > 0) m.shared_acts.resize(m.block_layout.total);
    for (int i = 0, kept = 0; i < L; i++)
      m.block_acts.push_back(recompute.recomputes(i) ? m.shared_acts.data() : m.kept_acts[kept++].data());
  }
  m.head_layout = head_activation_layout(cfg, batch);
  m.head_acts.resize(m.head_layout.total);
  m.scratch_layout = scratch_layout(cfg, batch, omp_get_max_threads());
  m.scratch.resize(m.scratch_layout.total);

  make_rope_tables<Ops>(m.rope_cos, m.rope_sin, cfg.seq_len, cfg);
  m.ctx.cfg = &m.cfg;
  m.ctx.batch = batch;
  m.ctx.rope_cos = m.rope_cos.data();
  m.ctx.rope_sin = m.rope_sin.data();
}

template <class T, class Ops>
Model<T, Ops>::~Model() = default;

template <class T, class Ops>
const ModelConfig& Model<T, Ops>::config() const {
  return impl_->cfg;
}
template <class T, class Ops>
int Model<T, Ops>::batch() const {
  return impl_->batch;
}
template <class T, class Ops>
int Model<T, Ops>::num_layers() const {
  return impl_->cfg.n_layers + 2;
}
template <class T, class Ops>
const std::string& Model<T, Ops>::layer_name(int l) const {
  return impl_->names.at(l);
}
template <class T, class Ops>
const ParamTable& Model<T, Ops>::table(int l) const {
  return impl_->tables.at(l);
}
template <class T, class Ops>
T* Model<T, Ops>::params(int l) {
  impl_->mark_stale(l);   // the caller may write through it
  return impl_->param_ptr.at(l);
}
template <class T, class Ops>
T* Model<T, Ops>::grads(int l) {
  return impl_->grad_ptr.at(l);
}
template <class T, class Ops>
void Model<T, Ops>::bind_params(int l, T* params) {
  ASTERIA_ASSERT(impl_->params.empty(), "bind_params on a model that owns its buffers");
  impl_->param_ptr.at(l) = params;
  impl_->update_param_views(l);
}
template <class T, class Ops>
void Model<T, Ops>::bind_grads(int l, T* grads) {
  ASTERIA_ASSERT(impl_->grads.empty(), "bind_grads on a model that owns its buffers");
  impl_->grad_ptr.at(l) = grads;
  impl_->update_grad_views(l);
}
template <class T, class Ops>
size_t Model<T, Ops>::num_params() const {
  size_t n = 0;
  for (const auto& t : impl_->tables) n += t.numel;
  return n;
}

template <class T, class Ops>
void Model<T, Ops>::init(uint64_t seed) {
  for (int l = 0; l < num_layers(); l++) init_layer(l, seed);
}

template <class T, class Ops>
void Model<T, Ops>::init_layer(int l, uint64_t seed) {
  Impl& m = *impl_;
  ASTERIA_ASSERT(m.param_ptr.at(l) || m.tables[l].numel == 0, "init_layer(", l, "): no parameter buffer bound");
  const int block = (l >= 1 && l <= m.cfg.n_layers) ? l - 1 : -1;
  // Device memory: the values are made on the host and moved over in one copy.
  Buffer<T> staging(Ops::kHostMemory ? 0 : m.tables[l].numel);
  T* layer = Ops::kHostMemory ? m.param_ptr[l] : staging.data();
  for (const auto& e : m.tables[l].entries) {
    T* p = layer + e.offset;
    if (e.cls == ParamClass::Norm) {
      for (size_t i = 0; i < e.numel; i++) p[i] = T(1);
    } else {
      fill_truncated_normal(p, e.numel, init_std_for(m.cfg, e, block), seed, name_stream(e.name));
    }
  }
  if (!Ops::kHostMemory) Ops::to_device(m.param_ptr[l], staging.data(), staging.size());
  m.mark_stale(l);
}

template <class T, class Ops>
void Model<T, Ops>::zero_grads() {
  Impl& m = *impl_;
  for (size_t l = 0; l < m.tables.size(); l++)
    if (m.grad_ptr[l]) Ops::zero(m.grad_ptr[l], m.tables[l].numel);
}

template <class T, class Ops>
void Model<T, Ops>::set_batch(const int32_t* inputs, const int32_t* targets) {
  Impl& m = *impl_;
  ASTERIA_ASSERT(!m.image, "set_batch on a parameter image (Storage::Image)");
  const int V = m.cfg.vocab_size;
  for (int i = 0; i < m.N; i++) {
    ASTERIA_CHECK(inputs[i] >= 0 && inputs[i] < V && targets[i] >= 0 && targets[i] < V,
                  "model: token id out of range [0, ", V, ") at position ", i, " (input ",
                  inputs[i], ", target ", targets[i], ")");
  }
  Ops::to_device(m.inputs.data(), inputs, m.N);
  Ops::to_device(m.targets.data(), targets, m.N);
}

template <class T, class Ops>
double Model<T, Ops>::forward(int l) {
  Impl& m = *impl_;
  const int L = m.cfg.n_layers;
  ASTERIA_ASSERT(l >= 0 && l <= L + 1 && !m.image, "forward(", l, ")");
  if (l == 0) {
    Ops::embedding_forward(m.x(0), m.inputs.data(), m.wte, m.N, m.cfg.d_model);
    return 0.0;
  }
  if (l <= L) {
    m.ctx.gemm = m.gemm_of(l);
    block_forward<T, Ops>(m.ctx, m.block_w[l - 1], m.block_layout, m.block_acts[l - 1], m.x(l - 1), m.x(l),
                  m.scratch_layout, m.scratch.data());
    if (m.bf16) m.store_bf16(l - 1);
    if (m.bf16 || recomputes(l)) m.shared_holds = l;
    return 0.0;
  }
  const auto r = head_forward<T, Ops>(m.cfg, m.batch, m.head_gemm(), m.head_w, m.head_layout, m.head_acts.data(), m.x(L),
                              m.targets.data());
  m.ce = r.ce;
  m.z = m.cfg.z_loss * r.z;  // the z-loss part of the loss: ce + z = loss
  return m.ce + m.z;
}

template <class T, class Ops>
bool Model<T, Ops>::recomputes(int l) const {
  const Impl& m = *impl_;
  return l >= 1 && l <= m.cfg.n_layers && m.recompute.recomputes(l - 1);
}

template <class T, class Ops>
void Model<T, Ops>::recompute(int l) {
  Impl& m = *impl_;
  ASTERIA_ASSERT(recomputes(l), "recompute(", l, "): the layer keeps its activations");
  if (m.shared_holds == l) return;
  // The same call as the forward's, into the same buffers: x(l) is rewritten with the values it
  // holds, and the activations come out bit for bit as they were (bf16: then rounded as they were).
  m.ctx.gemm = m.gemm_of(l);
  block_forward<T, Ops>(m.ctx, m.block_w[l - 1], m.block_layout, m.block_acts[l - 1], m.x(l - 1), m.x(l),
                m.scratch_layout, m.scratch.data());
  if (m.bf16) m.store_bf16(l - 1);
  m.shared_holds = l;
}

template <class T, class Ops>
void Model<T, Ops>::backward(int l, double grad_scale) {
  Impl& m = *impl_;
  const int L = m.cfg.n_layers;
  ASTERIA_ASSERT(l >= 0 && l <= L + 1, "layer ", l);
  const T scale = static_cast<T>(grad_scale);
  if (l == L + 1) {
    head_backward<T, Ops>(m.cfg, m.batch, m.head_gemm(), m.head_w, m.head_dw, m.head_layout, m.head_acts.data(), m.x(L),
                  m.targets.data(), m.scratch_layout, m.scratch.data(), scale);
  } else if (l >= 1) {
    if (m.bf16 && !recomputes(l) && m.shared_holds != l) {
      m.load_bf16(l - 1);
      m.shared_holds = l;
    }
    ASTERIA_ASSERT(!recomputes(l) || m.shared_holds == l, "backward(", l,
                   "): a recomputed block needs recompute(", l, ") first");
    m.ctx.gemm = m.gemm_of(l);
    block_backward<T, Ops>(m.ctx, m.block_w[l - 1], m.block_dw[l - 1], m.block_layout, m.block_acts[l - 1],
                   m.x(l - 1), m.scratch_layout, m.scratch.data(), scale);
  } else {
    Ops::embedding_backward(m.dwte, m.inputs.data(), m.scratch_layout.dres.in(m.scratch.data()),
                            m.N, m.cfg.d_model, scale);
  }
}

template <class T, class Ops>
double Model<T, Ops>::last_ce_loss() const {
  return impl_->ce;
}
template <class T, class Ops>
double Model<T, Ops>::last_z_loss() const {
  return impl_->z;
}

template <class T, class Ops>
const T* Model<T, Ops>::last_final_hidden() const {
  return impl_->head_layout.xf.in(impl_->head_acts.data());
}

template <class T, class Ops>
size_t Model<T, Ops>::bf16_copies_made() const {
  return impl_->copies_made;
}

template <class T, class Ops>
size_t Model<T, Ops>::bf16_copy_bytes() const {
  size_t n = 0;
  for (const auto& b : impl_->weights_bf16) n += b.size() * sizeof(uint16_t);
  return n;
}

template <class T, class Ops>
size_t Model<T, Ops>::activation_bytes() const {
  const Impl& m = *impl_;
  size_t elems = m.residual.size() + m.head_acts.size() + m.scratch.size() + m.shared_acts.size();
  for (const auto& b : m.kept_acts) elems += b.size();
  for (const auto& b : m.packed_fp32) elems += b.size();
  size_t bf16_elems = 0;
  for (const auto& b : m.packed_bf16) bf16_elems += b.size();
  return elems * sizeof(T) + bf16_elems * sizeof(uint16_t);
}

template class Model<float>;
template class Model<double>;
#ifdef ASTERIA_HAVE_CUDA
template class Model<float, CudaOps>;
#endif

}  // namespace asteria
