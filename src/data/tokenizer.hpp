#pragma once
// A trained SentencePiece model (PREFIX.model written by `asteria-data train-tokenizer`):
// text <-> token ids. Asteria's models have an end-of-document id (EOS) and no BOS: the encoder
// appends EOS after every document. Encoding is thread-safe (const); loading errors are
// asteria::Error naming the file.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace asteria {

class Tokenizer {
 public:
  explicit Tokenizer(const std::string& model_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  const std::string& path() const { return path_; }
  int64_t vocab_size() const;
  int32_t eos_id() const { return eos_id_; }
  // Ids of the text, without EOS.
  std::vector<int32_t> encode(std::string_view text) const;
  // Text of the ids; control ids (EOS) decode to nothing.
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string piece(int32_t id) const;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t eos_id_ = -1;
};

}  // namespace asteria
