// Asteria's SentencePiece tokenizer as Hugging Face's files (data/sentencepiece_to_hf.hpp),
// checked in Hugging Face's own implementation run here: @huggingface/tokenizers in node
// (scripts/hf_tokenizers/) loads the exported folder and encodes the adversarial corpus of
// tests/data/tokenizer_corpus/make_corpus.py (every document, the 10 MB one included); every
// document's ids must be SentencePiece's, and its decoding of them the document itself.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/corpus_jsonl.hpp"
#include "data/sentencepiece_to_hf.hpp"
#include "data/tokenizer.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

using test::TempDir;

const std::string kSource = ASTERIA_SOURCE_DIR;
const std::string kBin = ASTERIA_BIN_DIR;

void run(const std::string& cmd) { test::run_quietly(cmd, "/tmp/asteria-spm-hf-test.log"); }

std::vector<nlohmann::json> read_lines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(SentencePieceToHf, HuggingFaceEncodesAndDecodesAsSentencePiece) {
  TempDir dir;
  const std::string corpus = dir.file("corpus"), folder = dir.file("hf");
  run(kSource + "/scripts/hf_tokenizers/install.sh");
  run("python3 " + kSource + "/tests/data/tokenizer_corpus/make_corpus.py " + corpus);
  run(kBin + "/asteria-data train-tokenizer --corpus " + corpus + "/corpus.jsonl --vocab-size 12000 --max-train-bytes 3000000 --output " +
      dir.file("spm"));
  const HfTokenizerFiles files = sentencepiece_to_hf(dir.file("spm.model"), 2048);
  std::filesystem::create_directories(folder);
  write_hf_tokenizer_files(files, folder);
  run("node " + kSource + "/scripts/hf_tokenizers/encode.mjs " + folder + " " + corpus + "/corpus.jsonl " + dir.file("ids") +
      " --decode");

  const Tokenizer spm(dir.file("spm.model"));
  const std::vector<CorpusDocument> docs = read_corpus_jsonl(corpus + "/corpus.jsonl");
  const std::vector<nlohmann::json> ids = read_lines(dir.file("ids")), decoded = read_lines(dir.file("ids") + ".decoded.jsonl");
  ASSERT_EQ(ids.size(), docs.size());
  ASSERT_EQ(decoded.size(), docs.size());
  size_t same = 0, round_trips = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    const std::vector<int32_t> ours = spm.encode(docs[d].text), theirs = ids[d].get<std::vector<int32_t>>();
    if (ours == theirs) ++same;
    else {
      size_t k = 0;
      while (k < ours.size() && k < theirs.size() && ours[k] == theirs[k]) ++k;
      ADD_FAILURE() << "document " << d << " (" << docs[d].text.size() << " bytes): first difference at token " << k << ": "
                    << (k < ours.size() ? spm.piece(ours[k]) : "(end)") << " vs Hugging Face's "
                    << (k < theirs.size() ? spm.piece(theirs[k]) : "(end)");
    }
    if (decoded[d]["text"].get<std::string>() == docs[d].text) ++round_trips;
    else ADD_FAILURE() << "document " << d << ": Hugging Face's decoding differs from the text";
  }
  std::printf("%zu of %zu documents identical, %zu decoded back\n", same, docs.size(), round_trips);
  EXPECT_EQ(files.tokenizer_config["eos_token"], "</s>");
  EXPECT_EQ(files.tokenizer_config["model_max_length"], 2048);
}

}  // namespace
}  // namespace asteria
