#pragma once
// A Hugging Face byte-level BPE tokenizer read from its tokenizer.json (GPT-2's scheme, as
// GPT-NeoX's tokenizer for OLMo-1 and the cl100k-style one for OLMo-2 use it):
//   1. added tokens (special or not) are cut out of the text first, leftmost and longest;
//   2. each piece between them is normalized (none, or NFC: utf8proc) and pre-tokenized: a
//      ByteLevel pre-tokenizer with use_regex splits it by GPT-2's pattern, or a Split by the
//      file's own pattern (PCRE2 in UTF mode) then ByteLevel without its regex;
//   3. each word's UTF-8 bytes become GPT-2's printable byte characters, and BPE merges the
//      adjacent pair of lowest rank first (leftmost on ties) until none applies.
// Where Hugging Face's implementations differ among themselves, this follows the JavaScript one
// that the tests run (@huggingface/tokenizers; scripts/hf_tokenizers/README.md): its \s (U+FEFF
// in, U+0085 and U+180E out) in GPT-2's pattern, White_Space for \s in a file's pattern, ASCII-only
// case folding in (?i:...). What a file uses beyond this (another model, normalizer,
// pre-tokenizer, a single-word added token, byte fallback, dropout) is refused by name.
// Post-processors add nothing to a document here: Asteria's token files end every document
// with the end-of-document id itself (eos_id).
//
// Thread-safe: encode and decode are const; each thread keeps its own word cache.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace asteria {

class ByteLevelBpe {
 public:
  // path: a tokenizer.json, or a folder holding one (and perhaps tokenizer_config.json, whose
  // eos_token names the end-of-document token; else the added token <|endoftext|>).
  explicit ByteLevelBpe(const std::string& path);
  ~ByteLevelBpe();
  ByteLevelBpe(ByteLevelBpe&&) noexcept;
  ByteLevelBpe& operator=(ByteLevelBpe&&) noexcept;

  int64_t vocab_size() const;   // the largest id + 1 (the model's vocabulary and the added tokens)
  int32_t eos_id() const;
  // Ids of the text (added tokens where they occur, no end-of-document id). Bytes that are not
  // valid UTF-8 are read as TextDecoder reads them: each maximal ill-formed part is one U+FFFD.
  std::vector<int32_t> encode(std::string_view text) const;
  // The text of the ids (special added tokens decode to nothing).
  std::string decode(const std::vector<int32_t>& ids) const;
  std::string piece(int32_t id) const;   // the token as the file writes it

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether `path` names a Hugging Face tokenizer (a .json file, or a folder with tokenizer.json).
bool is_hf_tokenizer(const std::string& path);

}  // namespace asteria
