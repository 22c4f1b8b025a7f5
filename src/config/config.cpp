// Reading and writing the run configuration (contract in config.hpp).
#include "config/config.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <functional>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/cuda_visibility.hpp"
#include "core/error.hpp"
#include "hf/hf_config.hpp"
#include "runtime/coherence_registry.hpp"
#include "config/config_reader.hpp"
#include "config/config_schema.hpp"

namespace asteria {

using config_detail::node_text;
using config_detail::Origins;
using config_detail::parse_scalar;
using config_detail::Reader;

namespace {

std::string number_text(double v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, p);
  // Keep it a YAML float even when integral, so the type survives the round trip.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

class Writer {
 public:
  explicit Writer(YAML::Emitter& out) : out_(out) {}
  template <class T, class Check>
  void field(const char* key, const T& v, Check, OnResume) {
    out_ << YAML::Key << key << YAML::Value;
    if constexpr (std::is_same_v<T, bool>) out_ << (v ? "true" : "false");
    else if constexpr (std::is_floating_point_v<T>) out_ << number_text(v);
    else if constexpr (std::is_same_v<T, std::string>) out_ << YAML::DoubleQuoted << v;
    else out_ << v;
  }
  template <class E>
  void choice(const char* key, const E& v, std::vector<std::pair<std::string, E>> names, OnResume, bool quoted = false) {
    for (auto& [name, e] : names) {
      if (e != v) continue;
      out_ << YAML::Key << key << YAML::Value;
      if (quoted) out_ << YAML::DoubleQuoted;
      out_ << name;
    }
  }
  template <class S>
  void section(const char* key, S& sub) {
    out_ << YAML::Key << key << YAML::Value << YAML::BeginMap;
    schema::visit(*this, sub);
    out_ << YAML::EndMap;
  }
  void list(const char* key, const std::vector<std::string>& v, OnResume) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const std::string& s : v) out_ << YAML::DoubleQuoted << s;
    out_ << YAML::EndSeq;
  }
  template <class Check>
  void pair(const char* key, double a, double b, Check, OnResume) {
    out_ << YAML::Key << key << YAML::Value << YAML::Flow << YAML::BeginSeq << number_text(a)
         << number_text(b) << YAML::EndSeq;
  }

 private:
  YAML::Emitter& out_;
};

// Keys renamed since; the old name is still read, as the new one, with a note naming the new one
// (configs and --set lines written before, and the configs saved in older checkpoints).
struct RenamedKey {
  const char* section;
  const char* old_key;
  const char* new_key;
};
constexpr RenamedKey kRenamedKeys[] = {
    // "checkpoint" means a saved run only; the recompute of activations has its own name.
    {"train", "activation_checkpointing", "activation_recompute"},
    {"train", "checkpoint_every_k", "recompute_every_k"},
};

std::string renamed_note(const std::string& where, const RenamedKey& k) {
  return detail::concat(where, ": ", k.section, ".", k.old_key, " is now ", k.section, ".", k.new_key,
                        "; read as ", k.new_key);
}

// Moves each old key of the tree to its new name (an error when both are set).
void rename_old_keys(YAML::Node& root, const Origins& origins, std::vector<std::string>& notes) {
  for (const RenamedKey& k : kRenamedKeys) {
    const YAML::Node const_root = root;   // const: looking does not insert the section
    const YAML::Node section = const_root[k.section];
    if (!section || !section.IsMap() || !section[k.old_key]) continue;
    const std::string old_path = std::string(k.section) + "." + k.old_key;
    const std::string where = origins.where(old_path, section[k.old_key]);
    if (section[k.new_key])
      fail(where, ": '", old_path, "' is the old name of '", k.section, ".", k.new_key,
           "', which is set as well; keep only ", k.new_key);
    YAML::Node writable = root[k.section];
    writable[k.new_key] = writable[k.old_key];
    writable.remove(k.old_key);
    notes.push_back(renamed_note(where, k));
  }
}

// Applies "a.b.c=value" onto the tree, creating sections as needed.
void apply_override(YAML::Node& root, const std::string& arg, Origins& origins, std::vector<std::string>& notes) {
  auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("--set ", excerpt(arg), ": expected KEY=VALUE with a dotted key, e.g. optim.lr=1e-3");
  std::string key = arg.substr(0, eq);
  std::string value = arg.substr(eq + 1);
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string p; std::getline(ss, p, '.');) {
    if (p.empty()) fail("--set ", excerpt(arg), ": empty component in key '", excerpt(key), "'");
    parts.push_back(p);
  }
  for (const RenamedKey& k : kRenamedKeys)
    if (parts.size() == 2 && parts[0] == k.section && parts[1] == k.old_key) {
      notes.push_back(renamed_note("--set " + excerpt(arg), k));
      parts[1] = k.new_key;
      key = parts[0] + "." + parts[1];
    }
  YAML::Node cur = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = cur[parts[i]];
    if (!next || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next = cur[parts[i]];
    }
    if (!next.IsMap()) fail("--set ", excerpt(arg), ": '", excerpt(parts[i]), "' is not a section");
    cur.reset(next);
  }
  YAML::Node v;
  try {
    v = value.empty() ? YAML::Node(std::string()) : YAML::Load(value);
  } catch (const YAML::Exception& e) {
    fail("--set ", excerpt(arg), ": value is not valid YAML: ", e.msg);
  }
  cur[parts.back()] = v;
  origins.overrides[key] = arg;
}

// Checks across fields, and the values resolved from others (auto settings, defaults that
// depend on other keys, notes for the program to print).
void check_and_resolve(Config& cfg, const std::string& source) {
  const ModelConfig& m = cfg.model;
  if (m.d_model % m.n_heads != 0)
    fail(source, ": model.d_model (", m.d_model, ") must be divisible by model.n_heads (", m.n_heads, ")");
  if (m.head_dim() % 2 != 0)
    fail(source, ": model head dimension d_model / n_heads = ", m.head_dim(), " must be even for RoPE");
  if (m.embedding_size < m.vocab_size)
    fail(source, ": model.embedding_size (", m.embedding_size, ") must be >= model.vocab_size (",
         m.vocab_size, ")");
  if (m.norm_placement == NormPlacement::Post && m.norm == NormKind::LayerNorm)
    fail(source, ": model.norm_placement 'post' (OLMo-2) requires model.norm 'rmsnorm'");
  const DistributedConfig& d = cfg.distributed;
  if (d.world_size > 0 && d.ranks_per_node > 0 && d.world_size % d.ranks_per_node != 0)
    fail(source, ": distributed.world_size (", d.world_size, ") must be a whole number of nodes of "
         "distributed.ranks_per_node (", d.ranks_per_node, ") ranks");
  if (cfg.distributed.check_every_step) {
    cfg.notes.push_back(detail::concat(source, ": distributed.check_every_step is now distributed.check_every "
                                               "(steps between the replicas' checks); read as check_every: 1"));
    cfg.distributed.check_every = 1;
    cfg.distributed.check_every_step = false;
  }
  // Asteria mode staggers the refreshes unless told not to; native keeps the reference schedule.
  RuntimeConfig& rt = cfg.runtime;
  if (rt.stagger == Stagger::Auto) rt.stagger = rt.mode == RuntimeMode::Asteria ? Stagger::On : Stagger::Off;
  if (rt.backend == BackendKind::Auto) {
    std::string why;
    rt.backend = cuda_device_visible_here(&why) ? BackendKind::Cuda : BackendKind::Cpu;
    cfg.backend_choice = detail::concat("runtime.backend auto: ", to_string(rt.backend), " (", why, ")");
  }
  // The GPU computes its GEMMs on bf16 operands (docs/DESIGN.md "Precision"); the CPU in fp32 by
  // default: it has no bf16 GEMM (it rounds the operands and runs sgemm), so bf16 there saves
  // activation memory and costs time.
  if (rt.precision == ComputePrecision::Auto)
    rt.precision = rt.backend == BackendKind::Cuda ? ComputePrecision::Bf16 : ComputePrecision::Fp32;
  if (rt.shadow.lane == ShadowLane::Device && rt.backend != BackendKind::Cuda)
    fail(source, ": runtime.shadow.lane device needs runtime.backend cuda (the refreshes by the GPU's solvers); "
         "on the CPU use workers, compute or auto");
  // Staleness alone keeps SOAP's bases up to S periods old while they still turn fast (+11 % final
  // loss at S = 5 on bench-small); the default tolerance ships those that moved.
  if (cfg.runtime.coherence.tolerance < 0)
    cfg.runtime.coherence.tolerance = cfg.runtime.coherence.staleness > 1 ? CoherenceRule::kDefaultTolerance : 0.0;
  // A dropped version's owner continues from it (runtime/shadow.hpp): it must know a refresh's
  // decision, made at its publish step, before the block's next refresh F steps later.
  if (rt.coherence.staleness > 1 && describe(cfg.optim.name).refresh_continues &&
      rt.shadow.delay > cfg.optim.precondition_frequency)
    fail(source, ": runtime.coherence.staleness ", rt.coherence.staleness, " needs runtime.shadow.delay (", rt.shadow.delay,
         ") <= optim.precondition_frequency (", cfg.optim.precondition_frequency,
         "): each refresh continues from the last one's version, decided when it publishes");
  if (cfg.train.warmup_steps > cfg.train.steps) {
    // A short run of a long recipe (--set train.steps=2, a smoke test) runs; its warm-up is cut.
    cfg.notes.push_back(detail::concat(source, ": train.warmup_steps ", cfg.train.warmup_steps, " exceeds train.steps ",
                            cfg.train.steps, "; the warm-up is clipped to ", cfg.train.steps, " steps"));
    cfg.train.warmup_steps = cfg.train.steps;
  }
}

// The dotted keys of the leaves under `n`.
void collect_keys(const YAML::Node& n, const std::string& key, std::set<std::string>& out) {
  if (!n.IsMap()) {
    out.insert(key);
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it)
    collect_keys(it->second, key.empty() ? it->first.Scalar() : key + "." + it->first.Scalar(), out);
}

// A model field's value as messages show it.
std::string value_text(int v) { return std::to_string(v); }
std::string value_text(double v) { return number_text(v); }
std::string value_text(bool v) { return v ? "true" : "false"; }
template <class E>
std::string value_text(E v) { return to_string(v); }

// model.init_from: the folder's config.json sets every architecture key; one the config (or its
// preset) sets too must agree. seq_len and vocab_size are the run's own choice (the context it
// trains at; the tokenizer's ids, <= the rows); without one they take max_position_embeddings
// and the rows.
void resolve_init_from(Config& cfg, const YAML::Node& root, const Origins& origins) {
  ModelConfig& m = cfg.model;
  const YAML::Node model = root["model"];
  hf::HfModelConfig hf;
  try {
    hf = hf::read_config(m.init_from);
  } catch (const Error& e) {
    fail(origins.where("model.init_from", model ? model["init_from"] : YAML::Node()), ": model.init_from: ", e.what());
  }
  const bool preset = !m.preset.empty();
  auto set_here = [&](const std::string& key) -> std::string {
    if (cfg.was_given("model." + key)) return origins.where("model." + key, model ? model[key] : YAML::Node());
    if (preset) return "model.preset " + m.preset;
    return "";
  };
  auto take = [&](const std::string& key, const std::string& from, auto ModelConfig::*field) {
    const std::string where = set_here(key);
    if (!where.empty() && m.*field != hf.model.*field)
      fail(where, ": model.", key, " is ", value_text(m.*field), " but model.init_from's ", hf.path, " gives ",
           value_text(hf.model.*field), " (", from, "); remove model.", key, " or make them agree");
    m.*field = hf.model.*field;
  };
  for (const auto& [key, from] : hf.determines) {
    if (key == "d_model") take(key, from, &ModelConfig::d_model);
    else if (key == "n_layers") take(key, from, &ModelConfig::n_layers);
    else if (key == "n_heads") take(key, from, &ModelConfig::n_heads);
    else if (key == "mlp_hidden") take(key, from, &ModelConfig::mlp_hidden);
    else if (key == "embedding_size") take(key, from, &ModelConfig::embedding_size);
    else if (key == "rope_theta") take(key, from, &ModelConfig::rope_theta);
    else if (key == "tied_embeddings") take(key, from, &ModelConfig::tied_embeddings);
    else if (key == "norm") take(key, from, &ModelConfig::norm);
    else if (key == "norm_placement") take(key, from, &ModelConfig::norm_placement);
    else if (key == "qk_norm") take(key, from, &ModelConfig::qk_norm);
    else if (key == "norm_eps") take(key, from, &ModelConfig::norm_eps);
    else ASTERIA_ASSERT(false, "config.json key for model.", key);
  }
  if (set_here("seq_len").empty()) m.seq_len = hf.model.seq_len;
  if (set_here("vocab_size").empty()) m.vocab_size = hf.model.vocab_size;
}

Config read_tree(YAML::Node root, const std::string& source, const std::vector<std::string>& overrides,
                 bool read_init_from) {
  Origins origins{source, {}};
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) fail(source, ": the top level must be a mapping of sections");
  std::vector<std::string> notes;
  rename_old_keys(root, origins, notes);
  for (auto& o : overrides) apply_override(root, o, origins, notes);
  rename_old_keys(root, origins, notes);   // an old key inside a whole section given by --set

  Config cfg;
  cfg.source = source;
  cfg.notes = std::move(notes);
  collect_keys(root, "", cfg.given);
  std::set<std::string> known = {"seed"};
  if (const YAML::Node s = root["seed"]) {
    int64_t seed = 0;
    if (!parse_scalar(s, seed) || seed < 0)
      fail(origins.where("seed", s), ": 'seed' must be a non-negative integer, got '", node_text(s), "'");
    cfg.seed = static_cast<uint64_t>(seed);
  }
  // The preset sets the model's defaults before the model's fields are read.
  if (const YAML::Node m = root["model"]; m && m.IsMap() && m["preset"] && !m["preset"].Scalar().empty()) {
    const YAML::Node p = m["preset"];
    try {
      cfg.model = model_preset(p.Scalar());
    } catch (const Error& e) {
      fail(origins.where("model.preset", p), ": 'model.preset': ", e.what());
    }
  }
  // The optimizer's name sets the optimizer's defaults before its fields are read.
  // An unknown name is refused, with the choices, when the section is read.
  if (const YAML::Node o = root["optim"]; o && o.IsMap() && o["name"] && o["name"].IsScalar())
    for (const auto& [name, kind] : schema::optimizer_kinds())
      if (name == o["name"].Scalar()) cfg.optim = optim_defaults(kind);
  schema::for_each_section(cfg, [&](const std::string& name, auto& section) {
    known.insert(name);
    const YAML::Node n = root[name];
    if (!n || n.IsNull()) return;
    if (!n.IsMap()) fail(origins.where(name, n), ": section '", name, "' must be a mapping");
    Reader r(n, name, origins);
    schema::visit(r, section);
    r.reject_unknown();
  });
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = it->first.Scalar();
    if (known.count(key)) continue;
    std::string all;
    for (auto& k : known) all += (all.empty() ? "" : ", ") + k;
    fail(origins.where(key, it->first), ": unknown key '", excerpt(key), "' (known top-level keys: ", all, ")");
  }
  if (read_init_from && !cfg.model.init_from.empty()) resolve_init_from(cfg, root, origins);
  check_and_resolve(cfg, source);
  return cfg;
}

}  // namespace

namespace {

YAML::Node parse_yaml(const std::string& yaml, const std::string& source_name) {
  try {
    return YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    fail(source_name, ":", e.mark.line + 1, ": invalid YAML: ", e.msg);
  }
}

}  // namespace

Config load_config_text(const std::string& yaml, const std::string& source_name,
                        const std::vector<std::string>& overrides) {
  return read_tree(parse_yaml(yaml, source_name), source_name, overrides, /*read_init_from=*/true);
}

Config load_saved_config(const std::string& yaml, const std::string& source_name) {
  return read_tree(parse_yaml(yaml, source_name), source_name, {}, /*read_init_from=*/false);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) fail("cannot open config file '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_config_text(ss.str(), path, overrides);
}

std::string config_to_yaml(const Config& cfg_in) {
  Config cfg = cfg_in;
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "seed" << YAML::Value << cfg.seed;
  schema::for_each_section(cfg, [&](const std::string& name, auto& section) {
    out << YAML::Key << name << YAML::Value << YAML::BeginMap;
    Writer w(out);
    schema::visit(w, section);
    out << YAML::EndMap;
  });
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

bool Config::was_given(const std::string& key) const {
  for (const std::string& g : given)
    if (g == key || g.rfind(key + ".", 0) == 0) return true;
  return false;
}

uint64_t parse_byte_size(const std::string& text) {
  if (text == "unlimited") return std::numeric_limits<uint64_t>::max();
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail("'", excerpt(text), "' is not a byte size");
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  static const std::pair<const char*, double> units[] = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  for (const auto& [name, scale] : units)
    if (unit == name) {
      const double bytes = value * scale;
      ASTERIA_CHECK(value >= 0 && bytes < 1.8e19, "'", excerpt(text), "' is not a byte size");
      return static_cast<uint64_t>(bytes);
    }
  fail("'", excerpt(text), "' is not a byte size (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
}

void check_supported(const Config& cfg) {
  const OptimizerDescription& d = describe(cfg.optim.name);
  if (const std::string why = d.check(cfg.optim); !why.empty()) fail(cfg.source, ": ", why);
  if (cfg.runtime.backend == BackendKind::Cuda && !d.runs_on_cuda)
    fail(cfg.source, ": optim.name ", to_string(cfg.optim.name), " runs on the CPU backend only (runtime.backend cpu)");
}

}  // namespace asteria
