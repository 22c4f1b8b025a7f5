#pragma once
// The tokenizer that goes with an exported model: where it is found, the ids sentencepiece
// reports for it, and the note written beside the copy.
//
// Search order: --tokenizer PATH; else, next to the checkpoint config's data.train token file
// (relative paths as the config gives them, i.e. from the current folder), the "tokenizer"
// named by data.json (written by `asteria-data encode`), then tokenizer.model in that folder
// (the layout of scripts/prepare_data.sh). A tokenizer that is found must load and must not
// have more pieces than the model's vocab_size; otherwise asteria::Error naming the file.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace asteria::export_cli {

struct TokenizerInfo {
  std::string path;        // the sentencepiece model file found
  std::string found_by;    // how it was found, for the note and the summary line
  int64_t vocab_size = 0;  // pieces
  int bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;   // -1: none
  std::string bos_piece, eos_piece, pad_piece, unk_piece;   // "" where the id is -1
};

// The tokenizer for this export, or nullopt when none is given or found next to data.train.
std::optional<TokenizerInfo> locate_tokenizer(const Config& cfg, const std::string& explicit_path);

// Contents of tokenizer_note.json (also written, saying so, when there is no tokenizer).
nlohmann::ordered_json tokenizer_note(const std::optional<TokenizerInfo>& tok,
                                      const ModelConfig& model);

}  // namespace asteria::export_cli
