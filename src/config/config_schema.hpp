#pragma once
// The field list of every config section, written once. A visitor V provides
//   v.field(key, T& value, check, on_resume)           scalars (int, int64_t, double, bool, std::string)
//   v.choice(key, E& value, {{name, E}...}, on_resume, quoted)  enums spelled as strings (quoted:
//                                            written "in quotes", as the options that were strings are)
//   v.pair(key, double& a, double& b, check, on_resume) a two-element list ([beta1, beta2])
//   v.list(key, std::vector<std::string>&, on_resume)   a list of strings
// and is the YAML reader (config.cpp), the writer of the resolved config, the reference's
// describer (config_reference.cpp) or the collector of the resume policies.
// A check is a callable returning "" when the value is fine, else what it must be. Every key
// declares what a resume may do with it (OnResume, config.hpp): there is no default, so a key
// cannot be added without deciding.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "config/config.hpp"
#include "optim/optimizer_description.hpp"

namespace asteria::schema {

constexpr OnResume kFree = OnResume::Free;
constexpr OnResume kPlacement = OnResume::Placement;
constexpr OnResume kFixed = OnResume::Fixed;

inline auto at_least(double lo) {
  return [lo](double v) { return v >= lo ? std::string() : "must be >= " + std::to_string(lo); };
}
inline auto positive() {
  return [](double v) { return v > 0 ? std::string() : std::string("must be > 0"); };
}
inline auto in_range(double lo, double hi) {
  return [lo, hi](double v) {
    return (v >= lo && v <= hi)
               ? std::string()
               : "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  };
}
inline auto below_one() {
  return [](double v) { return (v >= 0 && v < 1) ? std::string() : std::string("must be in [0, 1)"); };
}
inline auto any() {
  return [](const auto&) { return std::string(); };
}
inline auto one_of(std::vector<std::string> names) {
  return [names](const std::string& v) {
    std::string all;
    for (auto& n : names) {
      if (n == v) return std::string();
      all += (all.empty() ? "" : ", ") + n;
    }
    return "must be one of: " + all;
  };
}

// The choices of an enum under the names its to_string gives (written once, beside the enum).
template <class E>
std::vector<std::pair<std::string, E>> named(std::initializer_list<E> values) {
  std::vector<std::pair<std::string, E>> out;
  for (E e : values) out.emplace_back(to_string(e), e);
  return out;
}

// The choices that were plain strings before they were enums are still written "in quotes", so
// the resolved config's text (config.yaml, the checkpoints' manifests) stays as it was.
constexpr bool kQuoted = true;

// optim.name's choices: every optimizer with a description (optim/optimizer_description.hpp).
inline std::vector<std::pair<std::string, OptimizerKind>> optimizer_kinds() {
  std::vector<std::pair<std::string, OptimizerKind>> out;
  for (const OptimizerDescription* d : optimizer_descriptions()) out.emplace_back(to_string(d->kind), d->kind);
  return out;
}

template <class V>
void visit(V& v, ModelConfig& m) {
  // `preset` is read first by the reader (it sets every other field's default).
  v.field("preset", m.preset, any(), kFixed);
  v.field("init_from", m.init_from, any(), kFree);
  v.field("d_model", m.d_model, at_least(1), kFixed);
  v.field("n_layers", m.n_layers, at_least(1), kFixed);
  v.field("n_heads", m.n_heads, at_least(1), kFixed);
  v.field("mlp_hidden", m.mlp_hidden, at_least(1), kFixed);
  v.field("vocab_size", m.vocab_size, at_least(2), kFixed);
  v.field("embedding_size", m.embedding_size, at_least(2), kFixed);
  v.field("seq_len", m.seq_len, at_least(1), kFixed);
  v.field("rope_theta", m.rope_theta, positive(), kFixed);
  v.choice("norm", m.norm, {{"layernorm", NormKind::LayerNorm}, {"rmsnorm", NormKind::RMSNorm}}, kFixed);
  v.choice("norm_placement", m.norm_placement,
           {{"pre", NormPlacement::Pre}, {"post", NormPlacement::Post}}, kFixed);
  v.field("qk_norm", m.qk_norm, any(), kFixed);
  v.field("tied_embeddings", m.tied_embeddings, any(), kFixed);
  v.field("z_loss", m.z_loss, at_least(0), kFixed);
  v.field("head_chunk", m.head_chunk, at_least(0), kPlacement);
  v.choice("attention", m.attention, {{"tiled", AttentionKind::Tiled}, {"full", AttentionKind::Full}}, kPlacement);
  v.choice("init", m.init, {{"mitchell", InitKind::Mitchell}, {"normal", InitKind::Normal}}, kFree);
  v.field("init_std", m.init_std, positive(), kFree);
  v.field("norm_eps", m.norm_eps, positive(), kFixed);
}

template <class V>
void visit(V& v, DataConfig& d) {
  v.field("train", d.train, any(), kFree);
  v.field("eval", d.eval, any(), kFree);
  v.choice("dtype", d.dtype, named({TokenDtypeChoice::Auto, TokenDtypeChoice::U16, TokenDtypeChoice::U32}), kFixed, kQuoted);
  v.field("eval_batches", d.eval_batches, at_least(1), kFree);
}

template <class V>
void visit(V& v, AdamW1DConfig& a) {
  v.field("lr", a.lr, any(), kFixed);
  v.pair("betas", a.beta1, a.beta2, below_one(), kFixed);
  v.field("eps", a.eps, positive(), kFixed);
  v.field("weight_decay", a.weight_decay, at_least(0), kFixed);
}

template <class V>
void visit(V& v, OptimConfig& o) {
  // `name` is read first by the reader (it sets every other field's default).
  v.choice("name", o.name, optimizer_kinds(), kFixed, kQuoted);
  v.field("lr", o.lr, positive(), kFixed);
  v.pair("betas", o.beta1, o.beta2, [](double b) {
    return (b >= 0 && b <= 1) ? std::string() : std::string("must be in [0, 1]");
  }, kFixed);
  v.field("eps", o.eps, positive(), kFixed);
  v.field("weight_decay", o.weight_decay, at_least(0), kFixed);
  v.field("decay_embeddings", o.decay_embeddings, any(), kFixed);
  v.field("decay_norms", o.decay_norms, any(), kFixed);
  v.field("grad_clip", o.grad_clip, any(), kFixed);
  v.field("compensated_updates", o.compensated_updates, any(), kFixed);
  v.field("shampoo_beta", o.shampoo_beta, [](double b) {
    return b <= 1 ? std::string() : std::string("must be <= 1 (negative: use beta2)");
  }, kFixed);
  v.field("root_eps", o.root_eps, at_least(0), kFixed);
  v.field("precondition_frequency", o.precondition_frequency, at_least(1), kFixed);
  v.field("start_preconditioning_step", o.start_preconditioning_step, at_least(1), kFixed);
  v.field("max_preconditioner_dim", o.max_preconditioner_dim, at_least(1), kFixed);
  v.field("max_failures", o.max_failures, at_least(0), kFree);
  v.field("precondition_embeddings", o.precondition_embeddings, any(), kFixed);
  v.choice("root_method", o.root_method, named({RootMethod::Eigh, RootMethod::Newton}), kFixed, kQuoted);
  v.choice("grafting", o.grafting, named({Grafting::Adam, Grafting::None}), kFixed, kQuoted);
  v.choice("refresh_dtype", o.refresh_dtype, named({matfn::Precision::Float64, matfn::Precision::Float32}), kFixed, kQuoted);
  v.field("kl_init_factor", o.kl_init_factor, positive(), kFixed);
  v.field("kl_max_clamp", o.kl_max_clamp, positive(), kFixed);
  v.field("ns_steps", o.ns_steps, at_least(1), kFixed);
  v.field("nesterov", o.nesterov, any(), kFixed);
  v.section("adamw_1d", o.adamw_1d);
}

template <class V>
void visit(V& v, TrainConfig& t) {
  v.field("steps", t.steps, at_least(1), kFree);
  v.field("micro_batch", t.micro_batch, at_least(1), kPlacement);
  v.field("grad_accum", t.grad_accum, at_least(1), kPlacement);
  v.field("eval_every", t.eval_every, at_least(0), kFree);
  v.choice("schedule", t.schedule, named({ScheduleKind::Cosine, ScheduleKind::Linear, ScheduleKind::Constant}),
           kFixed, kQuoted);
  v.field("warmup_steps", t.warmup_steps, at_least(0), kFixed);
  v.field("final_lr_fraction", t.final_lr_fraction, in_range(0, 1), kFixed);
  v.field("stop_after", t.stop_after, at_least(0), kFree);
  using Recompute = ActivationRecompute::Mode;
  v.choice("activation_recompute", t.activation_recompute,
           named({Recompute::None, Recompute::Blocks, Recompute::EveryK}), kFree, kQuoted);
  v.field("recompute_every_k", t.recompute_every_k, at_least(1), kFree);
}

template <class V>
void visit(V& v, ShadowConfig& s) {
  v.field("threads", s.threads, at_least(1), kFree);
  v.choice("lane", s.lane, named({ShadowLane::Auto, ShadowLane::Workers, ShadowLane::Compute, ShadowLane::Device}),
           kFree, kQuoted);
  v.field("delay", s.delay, at_least(0), kFixed);
  v.field("sync_steps", s.sync_steps, at_least(-1), kFixed);
  v.field("resident_jobs", s.resident_jobs, at_least(0), kFree);
  v.field("worker_delay_ms", s.worker_delay_ms, at_least(0), kFree);
}

inline auto byte_size() {
  return [](const std::string& s) {
    try {
      parse_byte_size(s);
      return std::string();
    } catch (const Error&) {
      return std::string("must be a byte size (e.g. 512MiB, 2GiB, 1000000) or unlimited");
    }
  };
}

template <class V>
void visit(V& v, TierBudgetConfig& t) {
  v.field("bytes", t.bytes, byte_size(), kFree);
}

template <class V>
void visit(V& v, DiskTierConfig& t) {
  v.field("bytes", t.bytes, byte_size(), kFree);
  v.field("path", t.path, any(), kFree);
}

template <class V>
void visit(V& v, ParamsTierConfig& p) {
  // Free: the same floats are read and written wherever they live (bit for bit).
  v.choice("home", p.home, named({ParamsHome::Memory, ParamsHome::Disk}), kFree);
  v.field("prefetch_distance", p.prefetch_distance, at_least(0), kFree);
}

template <class V>
void visit(V& v, TiersConfig& t) {
  v.section("device", t.device);
  v.section("host", t.host);
  v.section("disk", t.disk);
  v.field("prefetch_distance", t.prefetch_distance, at_least(0), kFree);
  v.section("params", t.params);
}

template <class V>
void visit(V& v, CoherenceConfig& c) {
  v.field("staleness", c.staleness, at_least(1), kFixed);
  v.field("tolerance", c.tolerance, at_least(0.0), kFixed);
  v.field("hierarchical", c.hierarchical, any(), kFree);
}

template <class V>
void visit(V& v, RuntimeConfig& r) {
  v.choice("mode", r.mode, named({RuntimeMode::Native, RuntimeMode::Asteria}), kFixed, kQuoted);
  v.choice("backend", r.backend, named({BackendKind::Auto, BackendKind::Cpu, BackendKind::Cuda}), kFixed, kQuoted);
  v.choice("precision", r.precision, named({ComputePrecision::Auto, ComputePrecision::Fp32, ComputePrecision::Bf16}),
           kFixed, kQuoted);
  v.field("threads", r.threads, at_least(0), kFree);
  v.choice("stagger", r.stagger, named({Stagger::Auto, Stagger::On, Stagger::Off}), kFixed, kQuoted);
  v.section("shadow", r.shadow);
  v.section("tiers", r.tiers);
  v.section("coherence", r.coherence);
  v.choice("blas", r.blas, named({BlasKernels::Auto, BlasKernels::AsIs}), kFree, kQuoted);
  v.choice("gemm", r.gemm, named({GemmChoice::Auto, GemmChoice::OpenBlas, GemmChoice::OneDnn}), kFree, kQuoted);
  v.field("memory_limit", r.memory_limit, [](const std::string& s) {
    return s == "auto" || byte_size()(s).empty() ? std::string() : std::string("must be auto, a byte size or unlimited");
  }, kFree);
  v.choice("placement", r.placement, named({PlacementMode::Auto, PlacementMode::Manual}), kFree, kQuoted);
}

template <class V>
void visit(V& v, DistributedConfig& d) {
  v.choice("fsdp", d.fsdp, named({FsdpMode::Full, FsdpMode::Hybrid, FsdpMode::None}), kFree, kQuoted);
  v.field("world_size", d.world_size, at_least(0), kFree);
  v.field("ranks_per_node", d.ranks_per_node, at_least(0), kFree);
  v.field("prefetch", d.prefetch, at_least(1), kFree);
  v.field("check_every", d.check_every, at_least(0), kFree);
  v.field("check_every_step", d.check_every_step, any(), kFree);
  v.field("timeout_s", d.timeout_s, positive(), kFree);
}

template <class V>
void visit(V& v, CheckpointConfig& c) {
  v.field("every", c.every, at_least(0), kFree);
  v.field("keep", c.keep, at_least(1), kFree);
  v.field("keep_every", c.keep_every, at_least(0), kFree);
  v.field("resume", c.resume, any(), kFree);
  v.field("async", c.async, any(), kFree);
  v.field("enabled", c.enabled, any(), kFree);
  v.list("allow_changes", c.allow_changes, kFree);
}

template <class V>
void visit(V& v, RunConfig& r) {
  v.field("dir", r.dir, [](const std::string& s) {
    return s.empty() ? std::string("must not be empty") : std::string();
  }, kFree);
  v.field("log_every", r.log_every, at_least(0), kFree);
  v.field("peak_flops", r.peak_flops, at_least(0), kFree);
  v.field("overwrite", r.overwrite, any(), kFree);
}

// Calls f(name, section) for every section, in the order they are written out.
template <class F>
void for_each_section(Config& c, F&& f) {
  f("model", c.model);
  f("data", c.data);
  f("optim", c.optim);
  f("train", c.train);
  f("runtime", c.runtime);
  f("distributed", c.distributed);
  f("checkpoint", c.checkpoint);
  f("run", c.run);
}

}  // namespace asteria::schema
