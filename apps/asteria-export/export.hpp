#pragma once
// One export: checkpoint folder -> Hugging Face-style model folder.
//   OUT/config.json          src/hf/hf_config.hpp
//   OUT/model.safetensors    src/hf/hf_tensor_map.hpp (names, splits), src/hf/safetensors.hpp (format)
//   OUT/tokenizer.model      the tokenizer (tokenizer_export.hpp), when one is given or found
//   OUT/tokenizer_note.json  its ids as sentencepiece reports them, or why there is none
// Everything is read and checked before anything is written: a refusal (unsupported model,
// bad checkpoint, bad tokenizer) leaves OUT untouched. The folder is written under a
// temporary name beside OUT and renamed onto it when complete. OUT must not exist or be empty.
#include <optional>
#include <string>

namespace asteria::export_cli {

struct ExportOptions {
  std::string checkpoint;
  std::string out;
  std::string dtype = "fp32";   // fp32 | bf16
  std::string tokenizer;        // "" = look next to data.train
};

struct ExportSummary {
  long long step = 0;
  std::string architecture;
  size_t tensors = 0;
  size_t safetensors_bytes = 0;
  std::optional<std::string> tokenizer;   // how it was found; nullopt = none
};

// Throws asteria::Error naming what is wrong (and the file and tensor where there is one).
ExportSummary run_export(const ExportOptions& opt);

}  // namespace asteria::export_cli
