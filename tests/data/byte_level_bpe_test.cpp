// Hugging Face byte-level BPE tokenizers (data/byte_level_bpe.hpp) against Hugging Face's own
// implementation run here: @huggingface/tokenizers in node (scripts/hf_tokenizers/, installed by
// its install.sh) encodes the adversarial corpus of tests/data/tokenizer_corpus/make_corpus.py
// (every document, the 10 MB one included, and the files that are not valid UTF-8) with small
// tokenizer.json files shaped as OLMo-1's GPT-NeoX one and OLMo-2's cl100k-style one
// (make_bpe_tokenizers.py); Asteria must give the same ids for every document.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/byte_level_bpe.hpp"
#include "data/corpus_jsonl.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kSource = ASTERIA_SOURCE_DIR;

void run(const std::string& cmd) { test::run_quietly(cmd, "/tmp/asteria-bpe-test.log"); }

std::vector<std::vector<int32_t>> read_ids(const std::string& path) {
  std::vector<std::vector<int32_t>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line).get<std::vector<int32_t>>());
  return out;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Compares each document's ids; reports the first few documents that differ.
void expect_same(const std::string& what, const std::vector<std::string>& texts, const ByteLevelBpe& bpe,
                 const std::vector<std::vector<int32_t>>& reference) {
  ASSERT_EQ(texts.size(), reference.size()) << what;
  int reported = 0;
  size_t same = 0;
  for (size_t d = 0; d < texts.size(); ++d) {
    const std::vector<int32_t> ids = bpe.encode(texts[d]);
    if (ids == reference[d]) {
      ++same;
      continue;
    }
    if (reported++ >= 5) continue;
    size_t k = 0;
    while (k < ids.size() && k < reference[d].size() && ids[k] == reference[d][k]) ++k;
    std::ostringstream os;
    os << what << " document " << d << " (" << texts[d].size() << " bytes): first difference at token " << k << ": ours";
    for (size_t i = k; i < std::min(ids.size(), k + 4); ++i) os << " " << ids[i] << " '" << bpe.piece(ids[i]) << "'";
    os << "; Hugging Face's";
    for (size_t i = k; i < std::min(reference[d].size(), k + 4); ++i) os << " " << reference[d][i] << " '" << bpe.piece(reference[d][i]) << "'";
    ADD_FAILURE() << os.str();
  }
  std::printf("%s: %zu of %zu documents identical\n", what.c_str(), same, texts.size());
}

TEST(ByteLevelBpe, GivesHuggingFacesIdsOnTheAdversarialCorpus) {
  TempDir dir;
  const std::string corpus = dir.file("corpus"), toks = dir.file("tok");
  run(kSource + "/scripts/hf_tokenizers/install.sh");
  run("python3 " + kSource + "/tests/data/tokenizer_corpus/make_corpus.py " + corpus);
  run("python3 " + kSource + "/tests/data/tokenizer_corpus/make_bpe_tokenizers.py " + corpus + " " + toks);
  std::vector<std::string> texts;
  for (const CorpusDocument& d : read_corpus_jsonl(corpus + "/corpus.jsonl")) texts.push_back(d.text);
  std::vector<fs::path> raw;
  for (const auto& e : fs::directory_iterator(corpus + "/raw"))
    if (e.path().extension() == ".bin") raw.push_back(e.path());
  std::sort(raw.begin(), raw.end());
  std::string raw_args;
  std::vector<std::string> raw_texts;
  for (const fs::path& p : raw) {
    raw_args += " " + p.string();
    std::string bytes = read_file(p);
    // TextDecoder drops one leading byte order mark; the rest is the tokenizer's to read.
    if (bytes.rfind("\xEF\xBB\xBF", 0) == 0) bytes.erase(0, 3);
    raw_texts.push_back(bytes);
  }
  for (const char* name : {"neox", "cl100k"}) {
    SCOPED_TRACE(name);
    const std::string tok = toks + "/" + name, out = dir.file(std::string(name) + ".ids");
    run("node " + kSource + "/scripts/hf_tokenizers/encode.mjs " + tok + " " + corpus + "/corpus.jsonl " + out);
    run("node " + kSource + "/scripts/hf_tokenizers/encode.mjs " + tok + " " + out + ".raw --raw-files" + raw_args);
    const ByteLevelBpe bpe(tok);
    expect_same(std::string(name) + " corpus", texts, bpe, read_ids(out));
    expect_same(std::string(name) + " raw bytes", raw_texts, bpe, read_ids(out + ".raw"));
  }
}

TEST(ByteLevelBpe, RefusesWhatItDoesNotImplementByName) {
  TempDir dir;
  auto refused = [&](const std::string& json, const std::string& needle) {
    std::ofstream(dir.file("tokenizer.json")) << json;
    try {
      ByteLevelBpe bpe(dir.file("tokenizer.json"));
      ADD_FAILURE() << "accepted: " << json;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
    }
  };
  refused(R"({"model": {"type": "Unigram", "vocab": []}})", "model type Unigram");
  refused(R"({"normalizer": {"type": "Lowercase"}, "model": {"type": "BPE", "vocab": {}, "merges": []}})", "normalizer Lowercase");
  refused(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "not a byte-level BPE");
  refused("{not json", "not a Hugging Face tokenizer.json");
}

}  // namespace
}  // namespace asteria
