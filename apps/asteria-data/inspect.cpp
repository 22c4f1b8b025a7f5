// inspect: opens a token file the way the trainer does (so every check of TokenFile runs) and
// reports what is in it. With a tokenizer it also counts documents (EOS ids) and decodes the
// first tokens; the decoded text is printed as a JSON string, EOS shown as its piece, so
// newlines and document ends stay visible.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "core/error.hpp"
#include "data/token_file.hpp"
#include "data/tokenizer.hpp"

namespace asteria::data_cli {

namespace {

TokenDtype parse_dtype(const std::string& name, int64_t vocab_size) {
  if (name == "uint16") return TokenDtype::U16;
  if (name == "uint32") return TokenDtype::U32;
  return token_dtype_for_vocab(vocab_size);
}

// Decodes ids segment by segment between EOS ids (a decoder drops control ids), joining the
// segments with the EOS piece.
std::string decode_with_eos(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string text;
  std::vector<int32_t> segment;
  for (int32_t id : ids) {
    if (id == tok.eos_id()) {
      text += tok.decode(segment) + tok.piece(id);
      segment.clear();
    } else {
      segment.push_back(id);
    }
  }
  return text + tok.decode(segment);
}

}  // namespace

void inspect(const InspectOptions& opt) {
  std::optional<Tokenizer> tok;
  if (!opt.tokenizer.empty()) tok.emplace(opt.tokenizer);
  if (opt.vocab_size == 0 && !tok)
    fail("inspect ", opt.file, ": give --vocab-size or --tokenizer (the ids are checked against it)");
  const int64_t vocab = opt.vocab_size > 0 ? opt.vocab_size : tok->vocab_size();
  if (tok && tok->vocab_size() > vocab)
    fail("inspect ", opt.file, ": --vocab-size ", vocab, " is smaller than the tokenizer's ",
         tok->vocab_size(), " (", opt.tokenizer, ")");

  const TokenFile file(opt.file, parse_dtype(opt.dtype, vocab), vocab);
  std::printf("file: %s\n", file.path().c_str());
  std::printf("dtype: %s\n", to_string(file.dtype()));
  std::printf("tokens: %zu\n", file.size());
  std::printf("max id: %u (vocab %lld)\n", file.max_id(), static_cast<long long>(vocab));
  if (tok) {
    size_t eos = 0;
    for (size_t i = 0; i < file.size(); ++i) eos += file[i] == static_cast<uint32_t>(tok->eos_id());
    std::printf("documents: %zu (EOS id %d)\n", eos, tok->eos_id());
  }

  const size_t n = std::min(file.size(), static_cast<size_t>(opt.show));
  std::vector<int32_t> ids(n);
  file.read(0, n, ids.data());
  std::printf("first %zu ids:", n);
  for (int32_t id : ids) std::printf(" %d", id);
  std::printf("\n");
  if (tok) {
    const std::string text = nlohmann::json(decode_with_eos(*tok, ids))
                                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("first %zu decoded: %s\n", n, text.c_str());
  }
}

}  // namespace asteria::data_cli
