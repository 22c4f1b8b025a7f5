#pragma once
// A tokenizer: text <-> token ids. Either a trained SentencePiece model (PREFIX.model written by
// `asteria-data train-tokenizer`) or a Hugging Face byte-level BPE tokenizer.json (a file, or a
// model's folder holding one: data/byte_level_bpe.hpp; a folder asteria-export wrote holds the
// SentencePiece model too, which is read). Asteria's token files have an
// end-of-document id (EOS) and no BOS: the encoder appends EOS after every document. Encoding is thread-safe (const); loading errors are
// asteria::Error naming the file.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace asteria {

class ByteLevelBpe;

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
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;   // or
  std::unique_ptr<ByteLevelBpe> bpe_;
  int32_t eos_id_ = -1;
};

// The tokenizer `asteria-data encode` made a token file with: the one data.json beside the file
// names (when it exists), else tokenizer.model in the file's folder (scripts/prepare_data.sh's
// layout); how it was found goes to *found_by ("named by DIR/data.json", "next to data.train
// FILE"). nullopt when there is neither.
std::optional<std::string> tokenizer_beside(const std::string& token_file, std::string* found_by = nullptr);

}  // namespace asteria
