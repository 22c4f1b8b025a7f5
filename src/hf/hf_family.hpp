#pragma once
// Which of Hugging Face transformers' OLMo classes computes the same function as an Asteria model:
//   norm_placement pre,  norm layernorm, no qk_norm, norm_eps 1e-5  -> OlmoForCausalLM  ("olmo")
//   norm_placement post, norm rmsnorm,   qk_norm                    -> Olmo2ForCausalLM ("olmo2")
// Tied or untied embeddings, any vocabulary padding and any z_loss (a training-only term) are
// fine for both; every other combination has no Hugging Face class and is refused by name.
#include "model/model_config.hpp"

namespace asteria::hf {

enum class HfFamily { Olmo, Olmo2 };

const char* model_type(HfFamily f);     // "olmo" / "olmo2"
const char* architecture(HfFamily f);   // "OlmoForCausalLM" / "Olmo2ForCausalLM"

// The class for this model; throws asteria::Error naming the unsupported combination (and listing
// the supported ones) otherwise. `what` starts the message ("cannot export").
HfFamily family_for(const ModelConfig& cfg, const char* what);

// The norm, its placement, QK-norm and (OLMo-1) eps that a family fixes, applied to cfg.
void apply_family(HfFamily f, ModelConfig& cfg);

}  // namespace asteria::hf
