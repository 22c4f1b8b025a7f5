#pragma once
// Asteria's SentencePiece BPE model (`asteria-data train-tokenizer`: byte fallback, identity
// normalization, the dummy "▁" prefix, spaces as "▁", digits split, <unk> 0 and </s> 1, no BOS)
// as Hugging Face's tokenizer files, so that its implementations encode and decode text as the
// SentencePiece model does:
//   tokenizer.json: a BPE model over the same pieces and ids, byte_fallback, its merges ranked as
//     SentencePiece merges (the merged piece's score first: its id, SentencePiece's BPE scores
//     falling with the id), a normalizer that prepends "▁" and writes spaces as "▁", no
//     pre-tokenizer (pieces never cross what SentencePiece splits on, so none is needed), and
//     the decoder that undoes it (▁ -> space, bytes fused, the prefix stripped); <unk> and </s>
//     as special added tokens.
//   tokenizer_config.json: PreTrainedTokenizerFast, eos </s>, unk <unk>, no BOS or padding,
//     model_max_length; special_tokens_map.json the same tokens.
// Tested against @huggingface/tokenizers in node (tests/data/sentencepiece_to_hf_test.cpp).
#include <nlohmann/json.hpp>
#include <string>

namespace asteria {

struct HfTokenizerFiles {
  nlohmann::ordered_json tokenizer, tokenizer_config, special_tokens_map;
};

// model_path: the .model file; model_max_length: the model's sequence length. Refuses (naming the
// file) a model that is not such a BPE model.
HfTokenizerFiles sentencepiece_to_hf(const std::string& model_path, int64_t model_max_length);

// Writes the three files into the folder `dir` (which must exist); a write error names the file.
void write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir);

}  // namespace asteria
