// Presets with the published numbers of the OLMo papers/configs (OLMo-1: arXiv 2402.00838,
// OLMo-2: arXiv 2501.00656), plus `tiny` (tests) and `bench-small` (CPU benchmarks).
#include "core/error.hpp"
#include "model/model_config.hpp"

namespace asteria {

namespace {

ModelConfig olmo1(int d, int layers, int heads, int hidden, bool tied) {
  ModelConfig c;
  c.d_model = d;
  c.n_layers = layers;
  c.n_heads = heads;
  c.mlp_hidden = hidden;
  c.vocab_size = 50280;
  c.embedding_size = 50304;
  c.seq_len = 2048;
  c.rope_theta = 10000.0;
  c.norm = NormKind::LayerNorm;
  c.norm_placement = NormPlacement::Pre;
  c.qk_norm = false;
  c.tied_embeddings = tied;
  c.init = InitKind::Mitchell;
  return c;
}

ModelConfig olmo2(int d, int layers, int heads, int hidden) {
  ModelConfig c;
  c.d_model = d;
  c.n_layers = layers;
  c.n_heads = heads;
  c.mlp_hidden = hidden;
  c.vocab_size = 100278;
  c.embedding_size = 100352;
  c.seq_len = 4096;
  c.rope_theta = 500000.0;
  c.norm = NormKind::RMSNorm;
  c.norm_placement = NormPlacement::Post;
  c.qk_norm = true;
  c.tied_embeddings = false;
  c.init = InitKind::Normal;
  c.init_std = 0.02;
  c.norm_eps = 1e-6;
  return c;
}

}  // namespace

const std::vector<std::string>& model_preset_names() {
  static const std::vector<std::string> names = {"olmo-1b",  "olmo2-1b", "olmo-700m", "olmo-7b",
                                                 "olmo2-7b", "tiny",     "bench-small"};
  return names;
}

ModelConfig model_preset(const std::string& name) {
  ModelConfig c;
  if (name == "olmo-1b") {
    c = olmo1(2048, 16, 16, 8192, true);
  } else if (name == "olmo-700m") {
    c = olmo1(1536, 16, 16, 6144, true);
  } else if (name == "olmo-7b") {
    c = olmo1(4096, 32, 32, 11008, false);
  } else if (name == "olmo2-1b") {
    c = olmo2(2048, 16, 16, 8192);
  } else if (name == "olmo2-7b") {
    c = olmo2(4096, 32, 32, 11008);
  } else if (name == "tiny") {
    c.d_model = 64;
    c.n_layers = 2;
    c.n_heads = 2;
    c.mlp_hidden = 256;
    c.vocab_size = 512;
    c.embedding_size = 512;
    c.seq_len = 64;
  } else if (name == "bench-small") {
    c.d_model = 256;
    c.n_layers = 4;
    c.n_heads = 4;
    c.mlp_hidden = 1024;
    c.vocab_size = 4096;
    c.embedding_size = 4096;
    c.seq_len = 256;
    c.rope_theta = 10000.0;
    c.norm = NormKind::RMSNorm;
    c.norm_placement = NormPlacement::Pre;
    c.tied_embeddings = false;
    c.init = InitKind::Normal;
  } else {
    std::string known;
    for (auto& n : model_preset_names()) known += (known.empty() ? "" : ", ") + n;
    fail("unknown model preset '", excerpt(name), "' (known: ", known, ")");
  }
  c.preset = name;
  return c;
}

const char* to_string(NormKind k) { return k == NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
const char* to_string(NormPlacement p) { return p == NormPlacement::Pre ? "pre" : "post"; }
const char* to_string(InitKind k) { return k == InitKind::Mitchell ? "mitchell" : "normal"; }
const char* to_string(AttentionKind k) { return k == AttentionKind::Tiled ? "tiled" : "full"; }

}  // namespace asteria
