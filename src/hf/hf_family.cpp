#include "hf/hf_family.hpp"

#include "core/error.hpp"

namespace asteria::hf {

namespace {

constexpr const char* kSupported =
    "supported: norm_placement=pre with norm=layernorm and qk_norm=false (OLMo-1, "
    "OlmoForCausalLM), or norm_placement=post with norm=rmsnorm and qk_norm=true (OLMo-2, "
    "Olmo2ForCausalLM)";

// OlmoLayerNorm hard-codes its eps.
constexpr double kOlmoLayerNormEps = 1e-5;

}  // namespace

const char* model_type(HfFamily f) { return f == HfFamily::Olmo ? "olmo" : "olmo2"; }
const char* architecture(HfFamily f) { return f == HfFamily::Olmo ? "OlmoForCausalLM" : "Olmo2ForCausalLM"; }

HfFamily family_for(const ModelConfig& cfg, const char* what) {
  const bool pre = cfg.norm_placement == NormPlacement::Pre;
  const bool layernorm = cfg.norm == NormKind::LayerNorm;
  auto refuse = [&](const auto&... why) { fail(what, " ", why..., "; ", kSupported); };
  if (pre && !layernorm)
    refuse("norm_placement=pre with norm=rmsnorm: neither OLMo class of transformers has pre-norm RMSNorm");
  if (!pre && layernorm)
    refuse("norm_placement=post with norm=layernorm: transformers' OLMo-2 class uses RMSNorm after each sublayer");
  if (pre && cfg.qk_norm)
    refuse("qk_norm=true with norm_placement=pre: transformers' OLMo-1 class (OlmoForCausalLM) has no QK-norm");
  if (!pre && !cfg.qk_norm)
    refuse("qk_norm=false with norm_placement=post: transformers' OLMo-2 class (Olmo2ForCausalLM) always applies "
           "QK-norm");
  // Another eps would silently change the function.
  if (pre && cfg.norm_eps != kOlmoLayerNormEps)
    refuse("norm=layernorm with norm_eps=", cfg.norm_eps, ": transformers' OLMo-1 LayerNorm has a fixed eps of 1e-5");
  return pre ? HfFamily::Olmo : HfFamily::Olmo2;
}

void apply_family(HfFamily f, ModelConfig& cfg) {
  const bool olmo = f == HfFamily::Olmo;
  cfg.norm = olmo ? NormKind::LayerNorm : NormKind::RMSNorm;
  cfg.norm_placement = olmo ? NormPlacement::Pre : NormPlacement::Post;
  cfg.qk_norm = !olmo;
  if (olmo) cfg.norm_eps = kOlmoLayerNormEps;
}

}  // namespace asteria::hf
