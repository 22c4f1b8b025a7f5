#include "data/sentencepiece_to_hf.hpp"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"

namespace asteria {

namespace {

using ojson = nlohmann::ordered_json;

const std::string kSpace = "\xE2\x96\x81";   // ▁

ojson added_token(int id, const std::string& content) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", true}};
}

// The byte lengths of a piece's UTF-8 characters' starts (its split points).
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

}  // namespace

HfTokenizerFiles sentencepiece_to_hf(const std::string& model_path, int64_t model_max_length) {
  sentencepiece::SentencePieceProcessor sp;
  if (const auto st = sp.Load(model_path); !st.ok()) fail("cannot load tokenizer ", model_path, ": ", st.ToString());
  if (sp.unk_id() != 0 || sp.eos_id() != 1 || sp.bos_id() >= 0 || sp.pad_id() >= 0)
    fail("tokenizer ", model_path, ": not one of asteria-data train-tokenizer's models (<unk> 0, </s> 1, no BOS, no padding)");
  // The dummy prefix: SentencePiece's encoding of "a" starts with "▁a" (or "▁" then "a").
  const std::vector<std::string> a = sp.EncodeAsPieces("a");
  if (a.empty() || a[0].rfind(kSpace, 0) != 0)
    fail("tokenizer ", model_path, ": a model without the dummy \"\u2581\" prefix is not supported");

  const int n = sp.GetPieceSize();
  std::unordered_map<std::string, int> id_of;
  ojson vocab = ojson::object();
  for (int id = 0; id < n; ++id) {
    const std::string piece = sp.IdToPiece(id);
    vocab[piece] = id;
    if (!sp.IsControl(id) && !sp.IsUnknown(id) && !sp.IsByte(id)) id_of[piece] = id;
  }
  // Every way a learned piece splits into two learned pieces, ranked as SentencePiece applies
  // them: the merged piece's id (its score) first, then the left and right pieces' ids.
  std::vector<std::tuple<int, int, int>> ranked;
  for (int id = 0; id < n; ++id) {
    if (sp.IsControl(id) || sp.IsUnknown(id) || sp.IsByte(id)) continue;
    const std::string piece = sp.IdToPiece(id);
    for (size_t k : char_starts(piece)) {
      if (k == 0) continue;
      const auto l = id_of.find(piece.substr(0, k)), r = id_of.find(piece.substr(k));
      if (l != id_of.end() && r != id_of.end()) ranked.emplace_back(id, l->second, r->second);
    }
  }
  std::sort(ranked.begin(), ranked.end());
  ojson merges = ojson::array();
  for (const auto& [merged, l, r] : ranked) merges.push_back(sp.IdToPiece(l) + " " + sp.IdToPiece(r));

  HfTokenizerFiles f;
  ojson& t = f.tokenizer;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = ojson::array({added_token(0, sp.IdToPiece(0)), added_token(1, sp.IdToPiece(1))});
  t["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      ojson::array({ojson{{"type", "Prepend"}, {"prepend", kSpace}},
                                    ojson{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}})}};
  t["pre_tokenizer"] = nullptr;
  t["post_processor"] = nullptr;
  t["decoder"] = {{"type", "Sequence"},
                  {"decoders", ojson::array({ojson{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                                             ojson{{"type", "ByteFallback"}}, ojson{{"type", "Fuse"}},
                                             ojson{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  t["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", sp.IdToPiece(0)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", vocab},
                {"merges", merges}};
  f.special_tokens_map = {{"eos_token", sp.IdToPiece(1)}, {"unk_token", sp.IdToPiece(0)}};
  f.tokenizer_config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                        {"eos_token", sp.IdToPiece(1)},
                        {"unk_token", sp.IdToPiece(0)},
                        {"bos_token", nullptr},
                        {"pad_token", nullptr},
                        {"add_bos_token", false},
                        {"add_eos_token", false},
                        {"clean_up_tokenization_spaces", false},
                        {"model_max_length", model_max_length}};
  return f;
}

void write_hf_tokenizer_files(const HfTokenizerFiles& files, const std::string& dir) {
  for (const auto& [name, json] : {std::pair{"tokenizer.json", &files.tokenizer}, std::pair{"tokenizer_config.json", &files.tokenizer_config},
                                   std::pair{"special_tokens_map.json", &files.special_tokens_map}}) {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream out(path);
    out << json->dump(2) << "\n";
    if (!out.flush()) fail("cannot write ", path);
  }
}

}  // namespace asteria
