#pragma once
// How an Asteria model's parameters map onto the tensors of Hugging Face's OLMo classes, both
// ways (export writes them, import reads them).
//
// Tensors (C = d_model, F = mlp_hidden, E = embedding_size; HF Linear weights are [out, in] like
// Asteria's, so every HF tensor is a contiguous row range of one Asteria tensor):
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
#include <string>
#include <vector>

#include "hf/hf_family.hpp"
#include "model/model_config.hpp"

namespace asteria::hf {

// One HF tensor: a contiguous range of one Asteria parameter tensor, so also of its layer's flat
// buffer (model/param_table.hpp).
struct TensorSlot {
  std::string name;              // the HF name
  std::vector<int64_t> shape;    // the HF shape
  int layer = 0;                 // the Asteria layer (0 embed, 1..N blocks, N+1 head)
  std::string entry;             // the Asteria tensor ("blocks.0.att_qkv")
  size_t entry_begin = 0;        // first element inside that tensor
  size_t layer_begin = 0;        // first element inside the layer's flat buffer
  size_t numel = 0;
};

// Every tensor HF's class has for this config, in model order. Together they cover every
// element of every Asteria parameter exactly once.
std::vector<TensorSlot> tensor_map(const ModelConfig& cfg, HfFamily family);

}  // namespace asteria::hf
