#include "data/tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/byte_level_bpe.hpp"

namespace asteria {

Tokenizer::Tokenizer(const std::string& model_path) : path_(model_path) {
  // An exported folder holds both: its tokenizer.model is the original.
  if (std::filesystem::is_directory(model_path) && std::filesystem::exists(std::filesystem::path(model_path) / "tokenizer.model"))
    path_ = (std::filesystem::path(model_path) / "tokenizer.model").string();
  else if (is_hf_tokenizer(model_path)) {
    bpe_ = std::make_unique<ByteLevelBpe>(model_path);
    eos_id_ = bpe_->eos_id();
    return;
  }
  sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = sp_->Load(path_);
  if (!status.ok()) fail("cannot load tokenizer ", path_, ": ", status.ToString());
  eos_id_ = sp_->eos_id();
  if (eos_id_ < 0)
    fail("tokenizer ", path_, " has no end-of-document (EOS) id; train it with "
         "`asteria-data train-tokenizer`");
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

int64_t Tokenizer::vocab_size() const { return bpe_ ? bpe_->vocab_size() : sp_->GetPieceSize(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (bpe_) return bpe_->encode(text);
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) fail("tokenizer ", path_, ": cannot encode text: ", status.ToString());
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  if (bpe_) return bpe_->decode(ids);
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail("tokenizer ", path_, ": cannot decode ids: ", status.ToString());
  return text;
}

std::string Tokenizer::piece(int32_t id) const {
  ASTERIA_CHECK(id >= 0 && id < vocab_size(), "tokenizer ", path_, ": id ", id,
                " is outside the vocabulary of ", vocab_size());
  return bpe_ ? bpe_->piece(id) : sp_->IdToPiece(id);
}

std::optional<std::string> tokenizer_beside(const std::string& token_file, std::string* found_by) {
  namespace fs = std::filesystem;
  if (token_file.empty()) return std::nullopt;
  const fs::path folder = fs::path(token_file).parent_path();
  const fs::path data_json = folder / "data.json";
  if (std::ifstream in(data_json); in) {
    try {
      const auto meta = nlohmann::json::parse(in);
      if (meta.contains("tokenizer") && meta["tokenizer"].is_string() && fs::exists(meta["tokenizer"].get<std::string>())) {
        if (found_by) *found_by = "named by " + data_json.string();
        return meta["tokenizer"].get<std::string>();
      }
    } catch (const nlohmann::json::exception&) {
      // Not ours to validate here: fall back to tokenizer.model beside it.
    }
  }
  const fs::path beside = folder / "tokenizer.model";
  if (!fs::exists(beside)) return std::nullopt;
  if (found_by) *found_by = "next to data.train " + token_file;
  return beside.string();
}

}  // namespace asteria
