// The config reference (contract in config_reference.hpp): a visitor over the schema that
// records each key's type, default and allowed values instead of reading or writing them.
#include "config/config_reference.hpp"

#include <cctype>
#include <charconv>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

#include "config/config_schema.hpp"
#include "core/error.hpp"

namespace asteria {

namespace {

// One line of meaning per key, by dotted path. Every key of the schema needs one and every
// entry must name a key of the schema (config_reference_markdown checks both ways).
const std::map<std::string, std::string> kMeanings = {
    {"seed", "seed of the initialization and of the training data's order"},
    // model
    {"model.preset", "named model whose values become the defaults of the other model keys (read first)"},
    {"model.init_from",
     "a Hugging Face OlmoForCausalLM / Olmo2ForCausalLM folder a fresh run starts from: its config.json sets the "
     "architecture (model keys the config also sets must agree), its safetensors the first parameters; optimizer "
     "state and counters start fresh; not read on resume"},
    {"model.d_model", "width of the residual stream"},
    {"model.n_layers", "transformer blocks"},
    {"model.n_heads", "attention heads; must divide d_model, and d_model / n_heads must be even (RoPE)"},
    {"model.mlp_hidden", "SwiGLU hidden size F (the up projection has 2F outputs)"},
    {"model.vocab_size", "tokenizer vocabulary: every token id must be below it"},
    {"model.embedding_size", "rows of the embedding and the LM head, the width the softmax runs over as in OLMo (the vocabulary padded; OLMo pads to 128); >= vocab_size"},
    {"model.seq_len", "context length in tokens"},
    {"model.rope_theta", "RoPE base"},
    {"model.norm", "layernorm (OLMo-1, without weights) or rmsnorm"},
    {"model.norm_placement", "pre: norm before each sublayer; post: after it (OLMo-2, needs rmsnorm)"},
    {"model.qk_norm", "RMSNorm (with weights) over the full q and k projections"},
    {"model.tied_embeddings", "the LM head reuses the token embedding"},
    {"model.z_loss", "coefficient of mean(logsumexp^2) added to the loss; 0 = off"},
    {"model.head_chunk",
     "rows of the LM head and loss computed at once: 0 = the whole micro-batch ([N, E] logits kept), "
     "k > 0 = chunks of k rows recomputed in the backward (execution only)"},
    {"model.attention",
     "tiled: the backward recomputes the probabilities a block of rows at a time; full: the [B, NH, T, T] "
     "probabilities are kept (execution only)"},
    {"model.init", "mitchell (OLMo-1: std 1/sqrt(fan_in), model/init.hpp) or normal (init_std)"},
    {"model.init_std", "standard deviation of the normal init, truncated at 3 sigma"},
    {"model.norm_eps", "epsilon of the norms"},
    // data
    {"data.train", "token file for training (required to train)"},
    {"data.eval", "token file for evaluation; empty = no evaluation"},
    {"data.dtype", "width of the token ids in the files: auto (from the vocabulary), uint16, uint32"},
    {"data.eval_batches", "fixed evaluation batches of train.micro_batch instances"},
    // optim
    {"optim.name", "the optimizer; its values (table below) become the defaults of the other optim keys (read first)"},
    {"optim.lr", "peak learning rate of the schedule (train.schedule)"},
    {"optim.betas", "[beta1, beta2]: momentum and second-moment EMA coefficients (AdamW needs beta2 < 1)"},
    {"optim.eps", "epsilon of the update's denominator"},
    {"optim.weight_decay", "decoupled weight decay"},
    {"optim.decay_embeddings", "AdamW: apply weight decay to wte / lm_head"},
    {"optim.decay_norms", "AdamW: apply weight decay to the norm weights"},
    {"optim.grad_clip", "clip the gradient's global L2 norm to this; <= 0 disables"},
    {"optim.compensated_updates", "Kahan-compensated parameter updates (optim/update_compensation.hpp)"},
    {"optim.shampoo_beta", "EMA coefficient of the preconditioner's factors; negative: beta2; 1: plain sums"},
    {"optim.root_eps", "Shampoo: the roots are of (L + root_eps I)"},
    {"optim.precondition_frequency", "F: steps between two refreshes of a block's roots / eigenbasis"},
    {"optim.start_preconditioning_step", "Shampoo: the first step that uses roots"},
    {"optim.max_preconditioner_dim", "a matrix is cut into blocks of at most this many rows and columns"},
    {"optim.max_failures", "consecutive failed refreshes of a block before the run stops"},
    {"optim.precondition_embeddings", "precondition the embeddings (false: they get optim.adamw_1d's AdamW)"},
    {"optim.root_method", "Shampoo: eigh, or newton (coupled Newton iteration)"},
    {"optim.grafting", "Shampoo: adam (the step's size grafted from Adam) or none"},
    {"optim.refresh_dtype", "precision of the roots / eigenbases computation"},
    {"optim.kl_init_factor", "KL-Shampoo: initial eigenvalue estimate"},
    {"optim.kl_max_clamp", "KL-Shampoo: cap of the inverse-sqrt eigenvalue estimates"},
    {"optim.ns_steps", "Muon: Newton-Schulz iterations of the orthogonalization"},
    {"optim.nesterov", "Muon: the Nesterov form of the momentum (else plain SGD momentum)"},
    {"optim.adamw_1d.lr",
     "AdamW of the tensors a second-order optimizer does not precondition (norm weights; embeddings unless "
     "precondition_embeddings): negative = optim.lr and its schedule, else this peak lr"},
    {"optim.adamw_1d.betas", "[beta1, beta2] of that AdamW"},
    {"optim.adamw_1d.eps", "epsilon of that AdamW"},
    {"optim.adamw_1d.weight_decay", "weight decay of that AdamW"},
    // train
    {"train.steps", "optimizer steps of the run (and of the lr schedule)"},
    {"train.micro_batch", "instances (sequences of model.seq_len tokens) per micro-batch"},
    {"train.grad_accum", "micro-batches per optimizer step"},
    {"train.eval_every", "steps between evaluations; 0 = only at the end (when data.eval is set)"},
    {"train.schedule", "learning-rate decay after the warm-up"},
    {"train.warmup_steps", "steps of linear warm-up (clipped to train.steps, with a note)"},
    {"train.final_lr_fraction", "the lr at the last step is optim.lr times this"},
    {"train.stop_after",
     "stop (with a checkpoint) after this step, the schedule still that of train.steps; 0 = run to train.steps"},
    {"train.activation_recompute",
     "blocks that recompute their activations for the backward instead of keeping them: none, blocks (all), "
     "every_k (0, k, 2k, ...); the older key train.activation_checkpointing is read with a note"},
    {"train.recompute_every_k", "k of activation_recompute every_k (older key: train.checkpoint_every_k)"},
    // runtime
    {"runtime.mode",
     "asteria: roots / eigenbases on the shadow pipeline, published runtime.shadow.delay steps later (synchronously "
     "during the warm-up); native: computed inline at the step they are due (the reference, the baseline)"},
    {"runtime.backend", "where the model and the optimizer's step run: auto (cuda where a GPU is visible and the build has "
                        "the backend, else cpu; said at startup), cpu, or cuda (train/device_training.hpp)"},
    {"runtime.precision",
     "the GEMMs' operands and the kept activations: auto (bf16 on cuda, fp32 on cpu), fp32, or bf16 (GEMMs on bf16 operands with fp32 accumulation, each block's activations for its backward stored as bf16; parameters, gradients and optimizer state stay fp32); resolved when the config loads"},
    {"runtime.threads", "compute threads; 0 = all cores"},
    {"runtime.stagger",
     "spread the blocks' refreshes over the F steps: auto (true in asteria mode, false in native), true, false; "
     "resolved when the config loads"},
    {"runtime.shadow.threads", "host worker threads of the shadow pipeline (low OS priority)"},
    {"runtime.shadow.lane",
     "where root jobs run: workers (host worker threads), compute (in parts on the compute lane's threads), "
     "device (the GPU's solvers; backend cuda), auto (workers when they have cores of their own, else compute)"},
    {"runtime.shadow.delay", "D: the snapshot of step t is published at step t + D"},
    {"runtime.shadow.sync_steps", "refreshes opened at steps <= this publish at once; -1 = train.warmup_steps"},
    {"runtime.shadow.resident_jobs", "refresh jobs in memory at most (the rest parked on the disk tier); 0 = all"},
    {"runtime.shadow.worker_delay_ms", "for tests: every root job first sleeps this long"},
    {"runtime.tiers.device.bytes", "budget of the device tier (hot state; on the CPU backend a budgeted host arena)"},
    {"runtime.tiers.host.bytes", "budget of the host tier (warm state: roots, eigenbases)"},
    {"runtime.tiers.disk.bytes", "budget of the disk tier"},
    {"runtime.tiers.disk.path", "directory of the disk tier's file; empty = <run.dir>/tiers"},
    {"runtime.tiers.prefetch_distance", "layers of the optimizer order prefetched into the device tier ahead of use"},
    {"runtime.tiers.params.home",
     "where the blocks' fp32 parameters live: memory, or disk (the disk tier's directory; a block is read into one of "
     "prefetch_distance + 1 whole-layer buffers before its forward, its backward and its optimizer step, and written "
     "back after the step; the embedding and the head stay in memory; the same bits; one CPU process only). "
     "runtime.placement auto chooses disk when nothing else fits"},
    {"runtime.tiers.params.prefetch_distance",
     "home disk: uses of offloaded layers (forward, backward, optimizer step) a layer's read runs ahead of; 0 = "
     "read right before its use"},
    {"runtime.coherence.staleness",
     "S: a block's version is shipped to the replicas when theirs is S versions behind (1: every version)"},
    {"runtime.coherence.tolerance",
     "tau: ship earlier when a version changes by more; 0 = off; -1 = CoherenceRule::kDefaultTolerance when "
     "staleness > 1, else off (resolved when the config loads)"},
    {"runtime.coherence.hierarchical", "owner -> node leader -> leaders -> their node; false: owner to every replica"},
    {"runtime.blas",
     "auto: a generic BLAS fallback is switched to the best kernels the CPU supports (after a self-check); "
     "as-is: the library's choice"},
    {"runtime.gemm",
     "the CPU backend's GEMMs: auto = oneDNN where its kernels are the faster (all fp32 GEMMs where it runs AVX-512; on "
     "AVX2 all but transposed-A products over K >= 1024; none without AVX2 or if its self-check fails), OpenBLAS for "
     "the rest and for LAPACK; with runtime.precision bf16, oneDNN's bf16 kernels where the CPU has AVX512-BF16 "
     "(else fp32 GEMMs on bf16-rounded operands); openblas | onednn: every fp32 GEMM by that library"},
    {"runtime.memory_limit",
     "memory a process may hold; auto = the smallest of MemAvailable, the cgroup's room (v2 or v1) shared by the machine's ranks, and RLIMIT_AS; a run "
     "estimated above it is refused before it allocates"},
    {"runtime.placement",
     "auto: the tier budgets and prefetch distance, activation recompute, model.head_chunk, the shadow pipeline's "
     "refreshes in flight and, last, the micro-batch (global batch kept) chosen at startup to fit runtime.memory_limit "
     "(keys the config gives are kept); with runtime.memory_limit auto the tier budgets are chosen again between steps "
     "when memory is taken or given back (the results' bits unchanged); manual: the config's keys as they are"},
    // distributed
    {"distributed.fsdp", "full (sharded over all ranks), hybrid (sharded in a node, replicated across), none (replicated)"},
    {"distributed.world_size",
     "for planning (--dry-run, --print-plan): plan for this many ranks; 0 = the launch's; a run refuses another value"},
    {"distributed.ranks_per_node", "ranks per node; 0 = from MPI"},
    {"distributed.prefetch", "sharded: layers whose gather runs ahead of the forward"},
    {"distributed.check_every",
     "steps between comparisons of the replicas' parameters (also at the end); 0 = at the end only"},
    {"distributed.check_every_step", "older spelling of check_every: 1"},
    {"distributed.timeout_s", "a collective not done by then ends the job, naming it"},
    // checkpoint
    {"checkpoint.every", "steps between checkpoints; 0 = only at the end of training (docs/checkpoints.md)"},
    {"checkpoint.keep", "the newest K checkpoints are kept ..."},
    {"checkpoint.keep_every", "... and every one whose step is a multiple of this (0: none)"},
    {"checkpoint.resume", "empty = fresh start; latest (fresh when there is none); or a checkpoint directory"},
    {"checkpoint.async",
     "write on a thread while training goes on (the step is held only for the copy); in the step when the "
     "copy would not fit in memory"},
    {"checkpoint.enabled", "false: no checkpoints at all (tests, benchmarks)"},
    {"checkpoint.allow_changes", "keys (or whole sections) that may differ from the checkpoint's config on resume"},
    // run
    {"run.dir", "output directory of the run (metrics, checkpoints, the resolved config)"},
    {"run.log_every", "steps between progress lines when stdout is not a terminal; 0 = about 20 per run"},
    {"run.peak_flops", "peak FLOP/s for MFU; 0 = from the CPU (cores x GHz x 32 fp32 FMA FLOP/cycle, 64 with full-width AVX-512)"},
    {"run.overwrite", "a run.dir that already holds metrics.jsonl is refused unless true"},
};
const std::map<std::string, std::string>& meanings() { return kMeanings; }

struct Row {
  std::string key;       // dotted path
  std::string type;
  std::string value;     // the default, as markdown
  std::string allowed;
  OnResume on_resume = OnResume::Fixed;
};

// "must be >= 1.000000" -> ">= 1": the check's message without its lead and trailing zeros.
std::string tidy(std::string s) {
  const std::string lead = "must be ";
  if (s.rfind(lead, 0) == 0) s.erase(0, lead.size());
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    out += s[i];
    if (s[i] == '.' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1])) && i + 1 < s.size() &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      size_t j = i + 1;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      std::string digits = s.substr(i + 1, j - i - 1);
      while (!digits.empty() && digits.back() == '0') digits.pop_back();
      if (digits.empty()) out.pop_back();
      else out += digits;
      i = j - 1;
    }
  }
  return out;
}

std::string number_text(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

std::string code(const std::string& s) { return "`" + s + "`"; }

template <class T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, bool>) return code(v ? "true" : "false");
  else if constexpr (std::is_floating_point_v<T>) return code(number_text(v));
  else if constexpr (std::is_integral_v<T>) return code(std::to_string(v));
  else return v.empty() ? code("\"\"") : code(v);
}

template <class T>
std::string type_text() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_floating_point_v<T>) return "number";
  else if constexpr (std::is_integral_v<T>) return "integer";
  else return "string";
}

// What a check allows, from its messages at probing values: the extremes of a number's range,
// an empty and an odd string. A check that accepts all of them allows any value of the type.
template <class T, class Check>
std::string allowed_text(Check& check) {
  if constexpr (std::is_same_v<T, bool>) {
    return "true, false";
  } else {
    std::vector<T> probes;
    if constexpr (std::is_arithmetic_v<T>)
      probes = {std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max()};
    else
      probes = {std::string(), std::string("\x01")};
    std::vector<std::string> said;
    for (const T& p : probes) {
      std::string m = check(p);
      if (m.empty()) continue;
      m = tidy(m);
      bool seen = false;
      for (auto& s : said) seen = seen || s == m;
      if (!seen) said.push_back(m);
    }
    if (said.empty()) return "any";
    std::string out;
    for (auto& s : said) out += (out.empty() ? "" : "; ") + s;
    return out;
  }
}

class Describer {
 public:
  Describer(std::string prefix, std::vector<Row>& rows) : prefix_(std::move(prefix)), rows_(rows) {}

  template <class T, class Check>
  void field(const char* key, T& v, Check check, OnResume r) {
    rows_.push_back({path(key), type_text<T>(), value_text(v), allowed_text<T>(check), r});
  }
  template <class E>
  void choice(const char* key, E& v, std::vector<std::pair<std::string, E>> names, OnResume r, bool /*quoted*/ = false) {
    std::string all, value;
    for (auto& [name, e] : names) {
      all += (all.empty() ? "one of: " : ", ") + name;
      if (e == v) value = code(name);
    }
    rows_.push_back({path(key), "choice", value, all, r});
  }
  template <class Check>
  void pair(const char* key, double& a, double& b, Check check, OnResume r) {
    rows_.push_back({path(key), "[number, number]", code("[" + number_text(a) + ", " + number_text(b) + "]"),
                     "each " + allowed_text<double>(check), r});
  }
  void list(const char* key, std::vector<std::string>& v, OnResume r) {
    std::string items;
    for (auto& s : v) items += (items.empty() ? "" : ", ") + s;
    rows_.push_back({path(key), "list of strings", code("[" + items + "]"), "any", r});
  }
  template <class S>
  void section(const char* key, S& sub) {
    Describer d(path(key), rows_);
    schema::visit(d, sub);
  }

 private:
  std::string path(const std::string& key) const { return prefix_ + "." + key; }
  std::string prefix_;
  std::vector<Row>& rows_;
};

template <class S>
std::vector<Row> describe(const std::string& name, S section) {
  std::vector<Row> rows;
  Describer d(name, rows);
  schema::visit(d, section);
  return rows;
}

std::string cell(std::string s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : schema::optimizer_kinds()) names.push_back(name);
  return names;
}

// A table of the keys whose default differs between variants (one column per variant).
std::string variants_table(const std::string& first, const std::vector<std::string>& names,
                           const std::vector<std::vector<Row>>& rows, const std::string& skip) {
  std::ostringstream o;
  o << "| " << first;
  for (auto& n : names) o << " | " << n;
  o << " |\n|---";
  for (size_t i = 0; i < names.size(); ++i) o << "|---";
  o << "|\n";
  for (size_t k = 0; k < rows[0].size(); ++k) {
    bool differs = false;
    for (auto& r : rows) differs = differs || r[k].value != rows[0][k].value;
    if (!differs || rows[0][k].key == skip) continue;
    o << "| " << code(rows[0][k].key);
    for (auto& r : rows) o << " | " << cell(r[k].value);
    o << " |\n";
  }
  return o.str();
}

// Every key has a meaning and every meaning a key.
void check_meanings(const std::vector<std::pair<std::string, std::vector<Row>>>& sections) {
  std::set<std::string> keys;
  for (auto& [name, rows] : sections)
    for (auto& r : rows) {
      keys.insert(r.key);
      if (!meanings().count(r.key))
        fail("config reference: key '", r.key, "' has no one-line meaning; add it to kMeanings in ",
             "src/config/config_reference.cpp");
    }
  for (auto& [key, text] : meanings())
    if (!keys.count(key))
      fail("config reference: kMeanings in src/config/config_reference.cpp names '", key,
           "', which the schema (src/config/config_schema.hpp) does not have");
}

}  // namespace

std::string config_reference_markdown() {
  Config defaults;
  std::vector<std::pair<std::string, std::vector<Row>>> sections;
  sections.push_back({"", {{"seed", "integer", value_text(defaults.seed), ">= 0", OnResume::Fixed}}});
  schema::for_each_section(defaults, [&](const std::string& name, auto& section) {
    sections.push_back({name, describe(name, section)});
  });
  // The model keys' defaults per preset, the optim keys' per optimizer.
  std::vector<std::vector<Row>> per_preset = {describe("model", ModelConfig{})};
  for (const std::string& p : model_preset_names()) per_preset.push_back(describe("model", model_preset(p)));
  std::vector<std::vector<Row>> per_optimizer;
  for (const auto& [name, kind] : schema::optimizer_kinds()) per_optimizer.push_back(describe("optim", optim_defaults(kind)));
  std::set<std::string> optim_varies, preset_varies;
  for (size_t k = 0; k < per_optimizer[0].size(); ++k)
    for (auto& r : per_optimizer)
      if (r[k].value != per_optimizer[0][k].value) optim_varies.insert(r[k].key);
  for (size_t k = 0; k < per_preset[0].size(); ++k)
    for (auto& r : per_preset)
      if (r[k].value != per_preset[0][k].value) preset_varies.insert(r[k].key);

  check_meanings(sections);

  std::ostringstream o;
  o << "# Configuration reference\n\n"
       "<!-- Generated by `asteria-train --print-config-reference` (src/config/config_reference.cpp) from the\n"
       "     config schema (src/config/config_schema.hpp); do not edit. ctest docs.configuration checks it. -->\n\n"
       "Every key `asteria-train` reads from its YAML config (`--config FILE`) or from `--set dotted.key=value`.\n"
       "A key that is absent keeps its default; an unknown key, a value of the wrong type or outside the\n"
       "allowed range is an error naming the key and where it came from (FILE:LINE or the `--set` argument).\n"
       "`model.preset` and `optim.name` are read before the other keys of their section: they set those\n"
       "keys' defaults ([per preset](#defaults-per-model-preset), [per optimizer](#defaults-per-optimizer)).\n"
       "`asteria-train --dry-run` prints the config fully resolved. How the keys are used: "
       "[training](training.md), [optimizers](optimizers.md), [runtime](runtime.md), "
       "[checkpoints](checkpoints.md), [multi-node](multi-node.md).\n\n"
       "Refresh this file after changing the schema:\n\n"
       "    build/bin/asteria-train --print-config-reference > docs/configuration.md\n\n"
       "Byte sizes are a number with an optional unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB) or `unlimited`.\n\n"
       "The column *on resume* says what a resume may do when the key differs from the checkpoint's\n"
       "([checkpoints](checkpoints.md#config-changes-on-resume)): **free** changes no bit and is accepted;\n"
       "**placement** changes the arithmetic, not the run (what `runtime.placement` chooses for a machine;\n"
       "the micro-batch only with the global batch kept) and is accepted and said; **fixed** is refused\n"
       "unless listed in `checkpoint.allow_changes`.\n";
  for (auto& [name, rows] : sections) {
    o << "\n## " << (name.empty() ? "Top level" : name) << "\n\n";
    o << "| key | type | default | allowed | on resume | meaning |\n|---|---|---|---|---|---|\n";
    for (auto& r : rows) {
      std::string value = r.value;
      if (preset_varies.count(r.key) && r.key != "model.preset") value += " ([per preset](#defaults-per-model-preset))";
      if (optim_varies.count(r.key) && r.key != "optim.name")
        value += " (adamw; [per optimizer](#defaults-per-optimizer))";
      std::string allowed = r.allowed;
      if (r.key == "model.preset") {
        allowed = "`\"\"` or one of: ";
        for (size_t i = 0; i < model_preset_names().size(); ++i)
          allowed += (i ? ", " : "") + model_preset_names()[i];
      }
      o << "| " << code(r.key) << " | " << r.type << " | " << cell(value) << " | " << cell(allowed) << " | "
        << to_string(r.on_resume) << " | " << cell(meanings().at(r.key)) << " |\n";
    }
  }
  o << "\n## Defaults per optimizer\n\n"
       "`optim.name` starts the optim section from that optimizer's values (`optim_defaults`,\n"
       "src/optim/optim_config.cpp; their sources and deviations: [optimizers](optimizers.md)); the keys\n"
       "written in the config override them. Keys not listed have the same default for all four.\n\n";
  o << variants_table("key", optimizer_names(), per_optimizer, "optim.name");
  o << "\n## Defaults per model preset\n\n"
       "`model.preset` starts the model section from the preset's values (`model_preset`,\n"
       "src/model/presets.cpp); the keys written in the config override them. The first column is the\n"
       "default without a preset. Keys not listed have the same default in every preset.\n\n";
  std::vector<std::string> preset_columns = {"(none)"};
  for (const std::string& p : model_preset_names()) preset_columns.push_back(p);
  o << variants_table("key", preset_columns, per_preset, "model.preset");
  return o.str();
}

}  // namespace asteria
