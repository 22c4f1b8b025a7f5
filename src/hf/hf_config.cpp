#include "hf/hf_config.hpp"

#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace asteria::hf {

nlohmann::ordered_json config_json(const ModelConfig& cfg, HfFamily family, WeightDtype dtype, const TokenIds& ids) {
  auto id = [](const std::optional<int64_t>& v) -> nlohmann::ordered_json {
    if (!v) return nullptr;   // null, never transformers' defaults (pad 1, eos 50279)
    return *v;
  };
  nlohmann::ordered_json j;
  j["architectures"] = {architecture(family)};
  j["model_type"] = model_type(family);
  j["hidden_size"] = cfg.d_model;
  j["intermediate_size"] = cfg.mlp_hidden;
  j["num_hidden_layers"] = cfg.n_layers;
  j["num_attention_heads"] = cfg.n_heads;
  j["num_key_value_heads"] = cfg.n_heads;
  j["hidden_act"] = "silu";
  j["vocab_size"] = cfg.embedding_size;
  j["max_position_embeddings"] = cfg.seq_len;
  j["rope_theta"] = cfg.rope_theta;
  j["rope_scaling"] = nullptr;
  if (family == HfFamily::Olmo2) j["rms_norm_eps"] = cfg.norm_eps;
  if (family == HfFamily::Olmo) j["clip_qkv"] = nullptr;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["tie_word_embeddings"] = cfg.tied_embeddings;
  j["initializer_range"] = cfg.init_std;
  j["use_cache"] = true;
  j["bos_token_id"] = id(ids.bos);
  j["eos_token_id"] = id(ids.eos);
  j["pad_token_id"] = id(ids.pad);
  j["torch_dtype"] = torch_dtype(dtype);
  return j;
}

namespace {

// Typed reads of config.json's keys, each failure naming the file and the key.
class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  int64_t positive_int(const char* key) const {
    if (!has(key)) fail(path_, ": no '", key, "' (a model config.json has it)");
    const auto& v = j_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 31) - 1)
      fail(path_, ": '", key, "' must be a positive integer, got ", excerpt(v.dump()));
    return v.get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_number()) fail(path_, ": '", key, "' must be a number, got ", excerpt(j_[key].dump()));
    return j_[key].get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_boolean()) fail(path_, ": '", key, "' must be true or false, got ", excerpt(j_[key].dump()));
    return j_[key].get<bool>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!j_[key].is_string()) fail(path_, ": '", key, "' must be a string, got ", excerpt(j_[key].dump()));
    return j_[key].get<std::string>();
  }
  std::optional<int64_t> token_id(const char* key, std::optional<int64_t> fallback) const {
    if (!j_.contains(key)) return fallback;
    if (j_[key].is_null()) return std::nullopt;
    // transformers allows a list of eos ids; the first is the one generation stops at too.
    const auto& v = j_[key].is_array() && !j_[key].empty() ? j_[key][0] : j_[key];
    if (!v.is_number_integer()) fail(path_, ": '", key, "' must be a token id, got ", excerpt(j_[key].dump()));
    return v.get<int64_t>();
  }
  // A key whose only supported value is "absent, null or `ok`".
  template <class... Why>
  void refuse_unless(bool ok, const char* key, const Why&... why) const {
    if (!ok) fail(path_, ": '", key, "' = ", excerpt(j_[key].dump()), ": ", why...);
  }
  const nlohmann::json& at(const char* key) const { return j_[key]; }

 private:
  const nlohmann::json& j_;
  std::string path_;
};

HfFamily family_of(const ConfigKeys& k, const std::string& path) {
  const std::string type = k.text("model_type", "");
  std::string archs = k.has("architectures") ? k.at("architectures").dump() : "none";
  HfFamily f;
  if (type == "olmo") f = HfFamily::Olmo;
  else if (type == "olmo2") f = HfFamily::Olmo2;
  else
    fail(path, ": model_type '", excerpt(type), "' (architectures ", excerpt(archs),
         ") is another architecture; Asteria imports OlmoForCausalLM (model_type olmo) and Olmo2ForCausalLM (olmo2)");
  if (k.has("architectures")) {
    const auto& a = k.at("architectures");
    bool listed = false;
    if (a.is_array())
      for (const auto& x : a) listed = listed || (x.is_string() && x.get<std::string>() == architecture(f));
    if (!listed)
      fail(path, ": architectures ", excerpt(archs), " do not name ", architecture(f), ", the class of model_type ",
           model_type(f));
  }
  return f;
}

// Only the default RoPE: no scaling of any kind.
void check_rope(const ConfigKeys& k, const std::string& path) {
  auto default_rope = [](const nlohmann::json& r) {
    if (!r.is_object()) return false;
    for (const char* type_key : {"rope_type", "type"})
      if (r.contains(type_key) && !(r[type_key].is_string() && r[type_key].get<std::string>() == "default"))
        return false;
    return r.contains("rope_type") || r.contains("type");
  };
  if (k.has("rope_scaling"))
    k.refuse_unless(default_rope(k.at("rope_scaling")), "rope_scaling",
                    "Asteria computes the default RoPE only (no scaled or extended positions)");
  if (k.has("rope_parameters")) {
    const auto& r = k.at("rope_parameters");
    k.refuse_unless(r.is_object() && (!r.contains("rope_type") || default_rope(r)), "rope_parameters",
                    "Asteria computes the default RoPE only (no scaled or extended positions)");
  }
}

}  // namespace

HfModelConfig read_config(const std::string& folder) {
  namespace fs = std::filesystem;
  HfModelConfig out;
  out.path = (fs::path(folder) / "config.json").string();
  std::ifstream in(out.path);
  if (!in) fail(folder, ": no config.json there (a Hugging Face model folder has one)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(out.path, ": not valid JSON (", e.what(), ")");
  }
  if (!j.is_object()) fail(out.path, ": not a JSON object");
  const ConfigKeys k(j, out.path);
  out.family = family_of(k, out.path);
  const bool olmo = out.family == HfFamily::Olmo;

  ModelConfig& m = out.model;
  m.preset = "";
  m.d_model = static_cast<int>(k.positive_int("hidden_size"));
  m.n_layers = static_cast<int>(k.positive_int("num_hidden_layers"));
  m.n_heads = static_cast<int>(k.positive_int("num_attention_heads"));
  m.mlp_hidden = static_cast<int>(k.positive_int("intermediate_size"));
  m.embedding_size = static_cast<int>(k.positive_int("vocab_size"));
  m.vocab_size = m.embedding_size;
  m.seq_len = k.has("max_position_embeddings") ? static_cast<int>(k.positive_int("max_position_embeddings")) : 2048;
  m.tied_embeddings = k.boolean("tie_word_embeddings", false);
  double theta = k.number("rope_theta", 10000.0);
  if (k.has("rope_parameters") && k.at("rope_parameters").is_object() && k.at("rope_parameters").contains("rope_theta")) {
    const auto& t = k.at("rope_parameters")["rope_theta"];
    if (!t.is_number()) fail(out.path, ": 'rope_parameters.rope_theta' must be a number, got ", excerpt(t.dump()));
    theta = t.get<double>();
  }
  if (!(theta > 0)) fail(out.path, ": 'rope_theta' must be > 0, got ", theta);
  m.rope_theta = theta;
  apply_family(out.family, m);
  if (!olmo) {
    m.norm_eps = k.number("rms_norm_eps", 1e-5);
    if (!(m.norm_eps > 0)) fail(out.path, ": 'rms_norm_eps' must be > 0, got ", m.norm_eps);
  }

  if (m.d_model % m.n_heads != 0)
    fail(out.path, ": hidden_size ", m.d_model, " is not a multiple of num_attention_heads ", m.n_heads);
  if (k.has("num_key_value_heads"))
    k.refuse_unless(k.at("num_key_value_heads").is_number_integer() && k.at("num_key_value_heads").get<int64_t>() == m.n_heads,
                    "num_key_value_heads", "grouped-query attention (fewer key/value heads than the ", m.n_heads,
                    " query heads) is not what Asteria's attention computes");
  if (k.has("head_dim"))
    k.refuse_unless(k.at("head_dim").is_number_integer() && k.at("head_dim").get<int64_t>() == m.d_model / m.n_heads,
                    "head_dim", "Asteria's heads are hidden_size / num_attention_heads = ", m.d_model / m.n_heads, " wide");
  if (k.has("hidden_act"))
    k.refuse_unless(k.at("hidden_act") == "silu", "hidden_act", "Asteria's MLP is SwiGLU (silu)");
  if (k.has("attention_bias"))
    k.refuse_unless(k.at("attention_bias") == false, "attention_bias", "Asteria's projections have no biases");
  if (k.has("mlp_bias")) k.refuse_unless(k.at("mlp_bias") == false, "mlp_bias", "Asteria's projections have no biases");
  if (k.has("attention_dropout"))
    k.refuse_unless(k.at("attention_dropout").is_number() && k.at("attention_dropout").get<double>() == 0.0,
                    "attention_dropout", "Asteria trains without dropout");
  if (k.has("clip_qkv"))
    k.refuse_unless(false, "clip_qkv", "Asteria does not clip q, k and v (OLMo models trained with clip_qkv are not "
                    "computed the same)");
  check_rope(k, out.path);

  out.determines = {{"d_model", "hidden_size"},
                    {"n_layers", "num_hidden_layers"},
                    {"n_heads", "num_attention_heads"},
                    {"mlp_hidden", "intermediate_size"},
                    {"embedding_size", "vocab_size"},
                    {"rope_theta", "rope_theta"},
                    {"tied_embeddings", "tie_word_embeddings"},
                    {"norm", std::string("model_type ") + model_type(out.family)},
                    {"norm_placement", std::string("model_type ") + model_type(out.family)},
                    {"qk_norm", std::string("model_type ") + model_type(out.family)},
                    {"norm_eps", olmo ? "model_type olmo: OlmoLayerNorm's fixed eps" : "rms_norm_eps"}};
  // transformers' defaults where the keys are absent (OlmoConfig and Olmo2Config: pad 1, eos 50279).
  out.ids.bos = k.token_id("bos_token_id", std::nullopt);
  out.ids.eos = k.token_id("eos_token_id", 50279);
  out.ids.pad = k.token_id("pad_token_id", 1);
  return out;
}

}  // namespace asteria::hf
