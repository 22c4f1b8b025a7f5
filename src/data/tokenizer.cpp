#include "data/tokenizer.hpp"

#include <sentencepiece_processor.h>

#include "core/error.hpp"

namespace asteria {

Tokenizer::Tokenizer(const std::string& model_path)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = sp_->Load(model_path);
  if (!status.ok()) fail("cannot load tokenizer ", model_path, ": ", status.ToString());
  eos_id_ = sp_->eos_id();
  if (eos_id_ < 0)
    fail("tokenizer ", model_path, " has no end-of-document (EOS) id; train it with "
         "`asteria-data train-tokenizer`");
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

int64_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) fail("tokenizer ", path_, ": cannot encode text: ", status.ToString());
  return {ids.begin(), ids.end()};
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  const auto status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) fail("tokenizer ", path_, ": cannot decode ids: ", status.ToString());
  return text;
}

std::string Tokenizer::piece(int32_t id) const {
  ASTERIA_CHECK(id >= 0 && id < vocab_size(), "tokenizer ", path_, ": id ", id,
                " is outside the vocabulary of ", vocab_size());
  return sp_->IdToPiece(id);
}

}  // namespace asteria
