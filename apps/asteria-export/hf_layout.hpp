#pragma once
// How an Asteria model maps onto Hugging Face transformers' OLMo classes.
//
// Supported (anything else is refused by name, see hf_family_for):
//   norm_placement pre,  norm layernorm, no qk_norm, norm_eps 1e-5  -> OlmoForCausalLM  ("olmo")
//   norm_placement post, norm rmsnorm,   qk_norm                    -> Olmo2ForCausalLM ("olmo2")
// Tied or untied embeddings and any z_loss (a training-only term) are fine for both.
//
// Tensors (C = d_model, F = mlp_hidden, E = embedding_size; HF Linear weights are [out, in]
// like Asteria's, so every HF tensor is a contiguous row range of an Asteria tensor):
//   wte                      -> model.embed_tokens.weight                          [E, C]
//   blocks.i.att_qkv rows [0,C) [C,2C) [2C,3C)
//                            -> model.layers.i.self_attn.{q,k,v}_proj.weight       [C, C]
//   blocks.i.att_out         -> model.layers.i.self_attn.o_proj.weight             [C, C]
//   blocks.i.mlp_up rows [0,F)  (SwiGLU's linear half x in x * silu(g))
//                            -> model.layers.i.mlp.up_proj.weight                  [F, C]
//   blocks.i.mlp_up rows [F,2F) (the gate g)
//                            -> model.layers.i.mlp.gate_proj.weight                [F, C]
//   blocks.i.mlp_down        -> model.layers.i.mlp.down_proj.weight                [C, F]
//   olmo2 only: blocks.i.q_norm / k_norm -> model.layers.i.self_attn.{q,k}_norm.weight    [C]
//               blocks.i.att_norm -> model.layers.i.post_attention_layernorm.weight      [C]
//               blocks.i.mlp_norm -> model.layers.i.post_feedforward_layernorm.weight    [C]
//               norm_f            -> model.norm.weight                                   [C]
//   untied only: lm_head     -> lm_head.weight                                     [E, C]
// (OLMo-1's LayerNorms have no weights, so "olmo" has no norm tensors.) Asteria's RoPE rotates
// the two halves of each head (x[i], x[i + hd/2]) by theta^(-2i/hd), which is HF's rotate_half
// convention, so q/k rows need no permutation.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint_reader.hpp"
#include "model/model_config.hpp"

namespace asteria::export_cli {

enum class HfFamily { Olmo, Olmo2 };

const char* hf_model_type(HfFamily f);     // "olmo" / "olmo2"
const char* hf_architecture(HfFamily f);   // "OlmoForCausalLM" / "Olmo2ForCausalLM"

// The HF class that computes the same function as this model; throws asteria::Error naming the
// unsupported combination (and listing the supported ones) otherwise.
HfFamily hf_family_for(const ModelConfig& cfg);

// A view of one HF tensor: `data` points into the checkpoint tensor it is cut from.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;   // row-major
  size_t numel() const;
};

// Every tensor HF's class loads for this config, in model order. `params` must hold every
// parameter of the config (read_checkpoint_params guarantees it) and outlive the views.
std::vector<HfTensor> hf_tensors(const ModelConfig& cfg, HfFamily family,
                                 const std::map<std::string, CheckpointTensor>& params);

}  // namespace asteria::export_cli
