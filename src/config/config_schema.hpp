#pragma once
// The field list of every config section, written once. A visitor V provides
//   v.field(key, T& value, check)           scalars (int, int64_t, double, bool, std::string)
//   v.choice(key, E& value, {{name, E}...}, quoted)  enums spelled as strings (quoted: written
//                                            "in quotes", as the options that were strings are)
//   v.pair(key, double& a, double& b, check) a two-element list ([beta1, beta2])
//   v.list(key, std::vector<std::string>&)   a list of strings
// and is either the YAML reader (config.cpp) or the writer of the resolved config.
// A check is a callable returning "" when the value is fine, else what it must be.
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "config/config.hpp"

namespace asteria::schema {

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

inline std::vector<std::pair<std::string, OptimizerKind>> optimizer_kinds() {
  return named({OptimizerKind::AdamW, OptimizerKind::Shampoo, OptimizerKind::Soap, OptimizerKind::KlShampoo});
}

template <class V>
void visit(V& v, ModelConfig& m) {
  // `preset` is read first by the reader (it sets every other field's default).
  v.field("preset", m.preset, any());
  v.field("init_from", m.init_from, any());
  v.field("d_model", m.d_model, at_least(1));
  v.field("n_layers", m.n_layers, at_least(1));
  v.field("n_heads", m.n_heads, at_least(1));
  v.field("mlp_hidden", m.mlp_hidden, at_least(1));
  v.field("vocab_size", m.vocab_size, at_least(2));
  v.field("embedding_size", m.embedding_size, at_least(2));
  v.field("seq_len", m.seq_len, at_least(1));
  v.field("rope_theta", m.rope_theta, positive());
  v.choice("norm", m.norm, {{"layernorm", NormKind::LayerNorm}, {"rmsnorm", NormKind::RMSNorm}});
  v.choice("norm_placement", m.norm_placement,
           {{"pre", NormPlacement::Pre}, {"post", NormPlacement::Post}});
  v.field("qk_norm", m.qk_norm, any());
  v.field("tied_embeddings", m.tied_embeddings, any());
  v.field("z_loss", m.z_loss, at_least(0));
  v.field("head_chunk", m.head_chunk, at_least(0));
  v.choice("attention", m.attention, {{"tiled", AttentionKind::Tiled}, {"full", AttentionKind::Full}});
  v.choice("init", m.init, {{"mitchell", InitKind::Mitchell}, {"normal", InitKind::Normal}});
  v.field("init_std", m.init_std, positive());
  v.field("norm_eps", m.norm_eps, positive());
}

template <class V>
void visit(V& v, DataConfig& d) {
  v.field("train", d.train, any());
  v.field("eval", d.eval, any());
  v.choice("dtype", d.dtype, named({TokenDtypeChoice::Auto, TokenDtypeChoice::U16, TokenDtypeChoice::U32}), kQuoted);
  v.field("eval_batches", d.eval_batches, at_least(1));
}

template <class V>
void visit(V& v, AdamW1DConfig& a) {
  v.field("lr", a.lr, any());
  v.pair("betas", a.beta1, a.beta2, below_one());
  v.field("eps", a.eps, positive());
  v.field("weight_decay", a.weight_decay, at_least(0));
}

template <class V>
void visit(V& v, OptimConfig& o) {
  // `name` is read first by the reader (it sets every other field's default).
  v.choice("name", o.name, optimizer_kinds(), kQuoted);
  v.field("lr", o.lr, positive());
  v.pair("betas", o.beta1, o.beta2, [](double b) {
    return (b >= 0 && b <= 1) ? std::string() : std::string("must be in [0, 1]");
  });
  v.field("eps", o.eps, positive());
  v.field("weight_decay", o.weight_decay, at_least(0));
  v.field("decay_embeddings", o.decay_embeddings, any());
  v.field("decay_norms", o.decay_norms, any());
  v.field("grad_clip", o.grad_clip, any());
  v.field("compensated_updates", o.compensated_updates, any());
  v.field("shampoo_beta", o.shampoo_beta, [](double b) {
    return b <= 1 ? std::string() : std::string("must be <= 1 (negative: use beta2)");
  });
  v.field("root_eps", o.root_eps, at_least(0));
  v.field("precondition_frequency", o.precondition_frequency, at_least(1));
  v.field("start_preconditioning_step", o.start_preconditioning_step, at_least(1));
  v.field("max_preconditioner_dim", o.max_preconditioner_dim, at_least(1));
  v.field("max_failures", o.max_failures, at_least(0));
  v.field("precondition_embeddings", o.precondition_embeddings, any());
  v.choice("root_method", o.root_method, named({RootMethod::Eigh, RootMethod::Newton}), kQuoted);
  v.choice("grafting", o.grafting, named({Grafting::Adam, Grafting::None}), kQuoted);
  v.choice("refresh_dtype", o.refresh_dtype, named({matfn::Precision::Float64, matfn::Precision::Float32}), kQuoted);
  v.field("kl_init_factor", o.kl_init_factor, positive());
  v.field("kl_max_clamp", o.kl_max_clamp, positive());
  v.section("adamw_1d", o.adamw_1d);
}

template <class V>
void visit(V& v, TrainConfig& t) {
  v.field("steps", t.steps, at_least(1));
  v.field("micro_batch", t.micro_batch, at_least(1));
  v.field("grad_accum", t.grad_accum, at_least(1));
  v.field("eval_every", t.eval_every, at_least(0));
  v.choice("schedule", t.schedule, named({ScheduleKind::Cosine, ScheduleKind::Linear, ScheduleKind::Constant}),
           kQuoted);
  v.field("warmup_steps", t.warmup_steps, at_least(0));
  v.field("final_lr_fraction", t.final_lr_fraction, in_range(0, 1));
  v.field("stop_after", t.stop_after, at_least(0));
  using Recompute = ActivationRecompute::Mode;
  v.choice("activation_recompute", t.activation_recompute,
           named({Recompute::None, Recompute::Blocks, Recompute::EveryK}), kQuoted);
  v.field("recompute_every_k", t.recompute_every_k, at_least(1));
}

template <class V>
void visit(V& v, ShadowConfig& s) {
  v.field("threads", s.threads, at_least(1));
  v.choice("lane", s.lane, named({ShadowLane::Auto, ShadowLane::Workers, ShadowLane::Compute, ShadowLane::Device}),
           kQuoted);
  v.field("delay", s.delay, at_least(0));
  v.field("sync_steps", s.sync_steps, at_least(-1));
  v.field("resident_jobs", s.resident_jobs, at_least(0));
  v.field("worker_delay_ms", s.worker_delay_ms, at_least(0));
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
  v.field("bytes", t.bytes, byte_size());
}

template <class V>
void visit(V& v, DiskTierConfig& t) {
  v.field("bytes", t.bytes, byte_size());
  v.field("path", t.path, any());
}

template <class V>
void visit(V& v, TiersConfig& t) {
  v.section("device", t.device);
  v.section("host", t.host);
  v.section("disk", t.disk);
  v.field("prefetch_distance", t.prefetch_distance, at_least(0));
}

template <class V>
void visit(V& v, CoherenceConfig& c) {
  v.field("staleness", c.staleness, at_least(1));
  v.field("tolerance", c.tolerance, at_least(0.0));
  v.field("hierarchical", c.hierarchical, any());
}

template <class V>
void visit(V& v, RuntimeConfig& r) {
  v.choice("mode", r.mode, named({RuntimeMode::Native, RuntimeMode::Asteria}), kQuoted);
  v.choice("backend", r.backend, named({BackendKind::Auto, BackendKind::Cpu, BackendKind::Cuda}), kQuoted);
  v.choice("precision", r.precision, named({ComputePrecision::Auto, ComputePrecision::Fp32, ComputePrecision::Bf16}),
           kQuoted);
  v.field("threads", r.threads, at_least(0));
  v.choice("stagger", r.stagger, named({Stagger::Auto, Stagger::On, Stagger::Off}), kQuoted);
  v.section("shadow", r.shadow);
  v.section("tiers", r.tiers);
  v.section("coherence", r.coherence);
  v.choice("blas", r.blas, named({BlasKernels::Auto, BlasKernels::AsIs}), kQuoted);
  v.field("memory_limit", r.memory_limit, [](const std::string& s) {
    return s == "auto" || byte_size()(s).empty() ? std::string() : std::string("must be auto, a byte size or unlimited");
  });
  v.choice("placement", r.placement, named({PlacementMode::Auto, PlacementMode::Manual}), kQuoted);
}

template <class V>
void visit(V& v, DistributedConfig& d) {
  v.choice("fsdp", d.fsdp, named({FsdpMode::Full, FsdpMode::Hybrid, FsdpMode::None}), kQuoted);
  v.field("world_size", d.world_size, at_least(0));
  v.field("ranks_per_node", d.ranks_per_node, at_least(0));
  v.field("prefetch", d.prefetch, at_least(1));
  v.field("check_every", d.check_every, at_least(0));
  v.field("check_every_step", d.check_every_step, any());
  v.field("timeout_s", d.timeout_s, positive());
}

template <class V>
void visit(V& v, CheckpointConfig& c) {
  v.field("every", c.every, at_least(0));
  v.field("keep", c.keep, at_least(1));
  v.field("keep_every", c.keep_every, at_least(0));
  v.field("resume", c.resume, any());
  v.field("async", c.async, any());
  v.field("enabled", c.enabled, any());
  v.list("allow_changes", c.allow_changes);
}

template <class V>
void visit(V& v, RunConfig& r) {
  v.field("dir", r.dir, [](const std::string& s) {
    return s.empty() ? std::string("must not be empty") : std::string();
  });
  v.field("log_every", r.log_every, at_least(0));
  v.field("peak_flops", r.peak_flops, at_least(0));
  v.field("overwrite", r.overwrite, any());
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
