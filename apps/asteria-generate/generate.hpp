#pragma once
// One generation: a model (an Asteria checkpoint or a Hugging Face OLMo / OLMo-2 folder), a
// prompt (text through the model's tokenizer, or token ids), and new tokens from the Decoder
// (model/decoder.hpp) on the CPU or CUDA backend, chosen by the Sampler (model/sampler.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/sampler.hpp"

namespace asteria::generate_cli {

struct GenerateOptions {
  std::string checkpoint;            // one of checkpoint / hf
  std::string hf;
  std::string prompt;                // text (needs a tokenizer) ...
  std::vector<int32_t> prompt_ids;   // ... or ids
  bool ids_given = false;
  std::string tokenizer;             // "" = the model's (next to data.train; tokenizer.model in an HF folder)
  int max_new_tokens = 64;
  bool stop_at_eos = true;
  SamplingOptions sampling;
  bool kv_cache = true;              // false: every token recomputes the whole sequence (the baseline)
  std::string backend = "auto";      // auto | cpu | cuda
  int context = 0;                   // 0 = the model's seq_len
};

struct GenerateResult {
  std::string model;                 // what was loaded, for the summary
  std::string backend;               // "cpu" / "cuda"
  std::vector<int32_t> prompt_ids, new_ids;
  std::optional<std::string> text;   // prompt and continuation, when there is a tokenizer
  bool stopped_at_eos = false;
  double load_s = 0;     // opening the model, allocating the decoder, reading the parameters
  double read_s = 0;     // of which reading the parameters into the decoder
  double prompt_s = 0, generate_s = 0;
};

// Throws asteria::Error naming what is wrong (model files, tokenizer, prompt, settings).
GenerateResult run_generate(const GenerateOptions& opt);

}  // namespace asteria::generate_cli
