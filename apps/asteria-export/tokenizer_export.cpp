#include "tokenizer_export.hpp"

#include <sentencepiece_processor.h>

#include <filesystem>

#include "core/error.hpp"
#include "data/tokenizer.hpp"

namespace asteria::export_cli {

namespace {

namespace fs = std::filesystem;

TokenizerInfo inspect(const std::string& path, const std::string& found_by, const ModelConfig& m) {
  sentencepiece::SentencePieceProcessor sp;
  const auto status = sp.Load(path);
  if (!status.ok())
    fail("cannot load tokenizer ", path, " (", found_by, "): ", status.ToString());
  TokenizerInfo t;
  t.path = path;
  t.found_by = found_by;
  t.vocab_size = sp.GetPieceSize();
  t.bos_id = sp.bos_id();
  t.eos_id = sp.eos_id();
  t.pad_id = sp.pad_id();
  t.unk_id = sp.unk_id();
  auto piece = [&](int id) { return id >= 0 && id < t.vocab_size ? sp.IdToPiece(id) : std::string(); };
  t.bos_piece = piece(t.bos_id);
  t.eos_piece = piece(t.eos_id);
  t.pad_piece = piece(t.pad_id);
  t.unk_piece = piece(t.unk_id);
  if (t.vocab_size > m.vocab_size)
    fail("tokenizer ", path, " (", found_by, ") has ", t.vocab_size,
         " pieces but the checkpoint's model.vocab_size is ", m.vocab_size,
         ": it is not the tokenizer this model was trained with");
  return t;
}

}  // namespace

std::optional<TokenizerInfo> locate_tokenizer(const Config& cfg, const std::string& explicit_path) {
  if (!explicit_path.empty()) return inspect(explicit_path, "--tokenizer", cfg.model);
  std::string found_by;
  const std::optional<std::string> path = tokenizer_beside(cfg.data.train, &found_by);
  if (!path) return std::nullopt;
  return inspect(*path, found_by, cfg.model);
}

nlohmann::ordered_json tokenizer_note(const std::optional<TokenizerInfo>& tok,
                                      const ModelConfig& model) {
  nlohmann::ordered_json note;
  if (!tok) {
    note["file"] = nullptr;
    note["note"] = "no tokenizer was given (--tokenizer) or found next to the checkpoint "
                   "config's data.train; config.json names no token ids";
  } else {
    note["file"] = "tokenizer.model";
    note["kind"] = "sentencepiece";
    note["source"] = fs::absolute(tok->path).string();
    note["found_by"] = tok->found_by;
    note["vocab_size"] = tok->vocab_size;
    note["bos_id"] = tok->bos_id;
    note["eos_id"] = tok->eos_id;
    note["pad_id"] = tok->pad_id;
    note["unk_id"] = tok->unk_id;
    note["pieces"] = {{"bos", tok->bos_piece}, {"eos", tok->eos_piece},
                      {"pad", tok->pad_piece}, {"unk", tok->unk_piece}};
    note["note"] = "ids as sentencepiece reports them, -1 = none. Asteria's data appends EOS "
                   "after every document and uses no BOS; config.json carries eos_token_id and "
                   "null for the ids that are -1.";
  }
  note["model_vocab_size"] = model.vocab_size;
  note["embedding_size"] = model.embedding_size;
  note["padding"] = "embedding rows vocab_size..embedding_size-1 (config.json vocab_size is "
                    "embedding_size) are padding that no token id maps to";
  return note;
}

}  // namespace asteria::export_cli
