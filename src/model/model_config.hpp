#pragma once
// Model configuration of the OLMo family (one code path) and the named presets.
#include <cstdint>
#include <string>
#include <vector>

namespace asteria {

enum class NormKind { LayerNorm, RMSNorm };      // LayerNorm: OLMo-1, without weights
enum class NormPlacement { Pre, Post };          // Post: OLMo-2, norm after each sublayer
enum class InitKind { Mitchell, Normal };
// Full: the softmax probabilities [B, NH, T, T] are kept for the backward (ops/attention.hpp).
// Tiled: only two floats per query row are kept and the backward recomputes the probabilities
// a block of rows at a time (ops/attention_tiled.hpp).
enum class AttentionKind { Full, Tiled };

struct ModelConfig {
  std::string preset;           // name of the preset the fields started from ("" = none)
  // A Hugging Face OlmoForCausalLM / Olmo2ForCausalLM folder a fresh run starts from ("" = the
  // init): its config.json sets the architecture (config/config.hpp), its weights the first
  // parameters (hf/hf_weights.hpp). Not read on resume.
  std::string init_from;
  int d_model = 64;
  int n_layers = 2;
  int n_heads = 2;
  int mlp_hidden = 256;          // SwiGLU hidden size F (the up projection has 2F outputs)
  int vocab_size = 512;          // tokenizer vocabulary: every token id must be below it
  int embedding_size = 512;      // rows of the embedding and LM head: the softmax's width (vocab padded, OLMo pads to 128)
  int seq_len = 64;              // context length
  double rope_theta = 10000.0;
  NormKind norm = NormKind::LayerNorm;
  NormPlacement norm_placement = NormPlacement::Pre;
  bool qk_norm = false;          // RMSNorm (with weights) over the full q and k projections
  bool tied_embeddings = true;   // LM head reuses the token embedding
  double z_loss = 0.0;           // coefficient of mean(logsumexp^2); 0 = off
  InitKind init = InitKind::Normal;
  double init_std = 0.02;        // for `normal`; truncated at 3 sigma
  double norm_eps = 1e-5;
  // Rows (tokens) of the LM head and loss computed at once: 0 = the whole micro-batch, with its
  // [N, V] logits kept for the backward; k > 0 = chunks of k rows, forward and again (recomputed)
  // in the backward, so only [k, V] logits ever exist (model/head.hpp). Execution only: the same
  // loss and gradients up to fp32 rounding of the sums.
  int head_chunk = 0;
  // Execution only as well: the same results within fp32 rounding, with and without the T x T.
  AttentionKind attention = AttentionKind::Tiled;

  int head_dim() const { return d_model / n_heads; }
};

// Names of all presets, in a stable order.
const std::vector<std::string>& model_preset_names();
// The preset's published numbers; throws asteria::Error naming the unknown preset.
ModelConfig model_preset(const std::string& name);

const char* to_string(NormKind);
const char* to_string(NormPlacement);
const char* to_string(InitKind);
const char* to_string(AttentionKind);

}  // namespace asteria
