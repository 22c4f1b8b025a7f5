#pragma once
// OLMo token files: headerless little-endian uint16 (vocab <= 65535) or uint32 token ids,
// memory-mapped read-only. Opening validates the file: it exists, is non-empty, its size is a
// multiple of the dtype, and every id is below the vocabulary (a bad id is reported with its
// file and token index). Errors are asteria::Error naming the file.
#include <cstddef>
#include <cstdint>
#include <string>

namespace asteria {

enum class TokenDtype { U16, U32 };

// uint16 when every id of a vocab_size vocabulary fits, uint32 otherwise.
TokenDtype token_dtype_for_vocab(int64_t vocab_size);
size_t token_dtype_bytes(TokenDtype d);
const char* to_string(TokenDtype d);

// data.dtype: a token width, or Auto (from the vocabulary: token_dtype_for_vocab).
enum class TokenDtypeChoice { Auto, U16, U32 };
inline const char* to_string(TokenDtypeChoice d) {
  switch (d) {
    case TokenDtypeChoice::Auto: return "auto";
    case TokenDtypeChoice::U16: return "uint16";
    case TokenDtypeChoice::U32: return "uint32";
  }
  return "?";
}

class TokenFile {
 public:
  TokenFile() = default;
  TokenFile(const std::string& path, TokenDtype dtype, int64_t vocab_size);
  ~TokenFile();
  TokenFile(TokenFile&&) noexcept;
  TokenFile& operator=(TokenFile&&) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  TokenDtype dtype() const { return dtype_; }
  size_t size() const { return count_; }         // number of tokens
  uint32_t operator[](size_t i) const;
  // Copies tokens [begin, begin + n) into out (as int32). Precondition: begin + n <= size().
  void read(size_t begin, size_t n, int32_t* out) const;
  uint32_t max_id() const { return max_id_; }

 private:
  std::string path_;
  TokenDtype dtype_ = TokenDtype::U16;
  const void* map_ = nullptr;
  size_t map_bytes_ = 0;
  size_t count_ = 0;
  uint32_t max_id_ = 0;
};

}  // namespace asteria
