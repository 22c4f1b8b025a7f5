// End to end: the built asteria-data program on a small corpus (train a tiny tokenizer, encode,
// inspect), and its error exits. Runs the binary from ASTERIA_BIN_DIR, so build it first
// (a plain `cmake --build build` builds every target).
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/corpus_jsonl.hpp"
#include "data/token_file.hpp"
#include "data/tokenizer.hpp"
#include "test_files.hpp"

namespace asteria {
namespace {

using test::TempDir;

struct ProgramRun {
  int status;
  std::string out, err;
};

ProgramRun asteria_data(const TempDir& dir, const std::string& args) {
  const std::string bin = std::string(ASTERIA_BIN_DIR) + "/asteria-data";
  if (!std::filesystem::exists(bin)) ADD_FAILURE() << bin << " is not built";
  const std::string cmd =
      bin + " " + args + " >" + dir.file("stdout.txt") + " 2>" + dir.file("stderr.txt");
  const int raw = std::system(cmd.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, test::read_text(dir.file("stdout.txt")),
          test::read_text(dir.file("stderr.txt"))};
}

// A small corpus with a bounded alphabet (so a 300-piece vocabulary fits), a newline, and
// characters outside the learned alphabet (so byte fallback is exercised).
std::vector<std::string> sample_documents() {
  const char* words[] = {"the", "whale", "ship", "sea", "captain", "sailed", "over", "deep",
                         "waters", "and", "harpoon", "crew", "watched", "white", "storm"};
  std::vector<std::string> docs;
  uint32_t x = 12345;
  for (int d = 0; d < 9; ++d) {
    std::string text;
    for (int w = 0; w < 120; ++w) {
      x = x * 1103515245u + 12345u;
      if (w > 0) text += (w % 17 == 0) ? ".\n" : " ";
      text += words[(x >> 16) % 15];
    }
    if (d == 4) text += " caf\xc3\xa9 \xe2\x80\x94 fin";
    docs.push_back(text + ".");
  }
  return docs;
}

void write_corpus(const std::string& path, const std::vector<std::string>& docs) {
  std::string jsonl;
  for (size_t i = 0; i < docs.size(); ++i)
    jsonl += nlohmann::json{{"source", "test"}, {"title", std::to_string(i)}, {"text", docs[i]}}
                 .dump() + "\n";
  test::write_bytes(path, std::vector<uint8_t>(jsonl.begin(), jsonl.end()));
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(AsteriaData, TrainEncodeInspectRoundTrip) {
  TempDir dir;
  const auto docs = sample_documents();
  write_corpus(dir.file("corpus.jsonl"), docs);

  ProgramRun r = asteria_data(dir, "train-tokenizer --corpus " + dir.file("corpus.jsonl") +
                                " --vocab-size 300 --output " + dir.file("tok"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  ASSERT_TRUE(std::filesystem::exists(dir.file("tok.model")));
  ASSERT_TRUE(std::filesystem::exists(dir.file("tok.vocab")));
  const Tokenizer tok(dir.file("tok.model"));
  EXPECT_EQ(tok.vocab_size(), 300);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.piece(1), "</s>");

  // Training again gives the same model bytes.
  const std::string model = test::read_text(dir.file("tok.model"));
  r = asteria_data(dir, "train-tokenizer --corpus " + dir.file("corpus.jsonl") +
                            " --vocab-size 300 --output " + dir.file("tok2"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::read_text(dir.file("tok2.model")), model);

  // Every 3rd document (2, 5, 8) is held out.
  r = asteria_data(dir, "encode --corpus " + dir.file("corpus.jsonl") + " --tokenizer " +
                            dir.file("tok.model") + " --output-dir " + dir.file("out") +
                            " --val-every 3");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  std::vector<std::string> train_docs, val_docs;
  for (size_t i = 0; i < docs.size(); ++i) (i % 3 == 2 ? val_docs : train_docs).push_back(docs[i]);

  for (const auto& [name, split] : {std::pair{"train", train_docs}, std::pair{"val", val_docs}}) {
    const std::string bin = dir.file("out/" + std::string(name) + ".bin");
    const TokenFile file(bin, TokenDtype::U16, 300);
    std::vector<int32_t> ids(file.size());
    file.read(0, ids.size(), ids.data());
    // Exactly one EOS per document, the last token an EOS, each document decodes to its text.
    std::vector<int32_t> doc_ids;
    size_t d = 0;
    for (int32_t id : ids) {
      if (id != tok.eos_id()) {
        doc_ids.push_back(id);
        continue;
      }
      ASSERT_LT(d, split.size()) << name << ": more EOS than documents";
      EXPECT_EQ(tok.decode(doc_ids), split[d]) << name << " document " << d;
      doc_ids.clear();
      ++d;
    }
    EXPECT_EQ(d, split.size()) << name;
    if (std::string(name) == "train") {  // holds document 4 and its rare characters
      const bool has_byte_piece =
          std::any_of(ids.begin(), ids.end(), [](int32_t id) { return id >= 2 && id < 258; });
      EXPECT_TRUE(has_byte_piece) << "byte fallback was not exercised";
    }
    EXPECT_TRUE(doc_ids.empty()) << name << ": tokens after the last EOS";

    // inspect agrees: count, dtype, documents, decoded text with EOS marks.
    r = asteria_data(dir, "inspect " + bin + " --vocab-size 300 --tokenizer " +
                              dir.file("tok.model") + " --show 1000000");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "dtype: uint16")) << r.out;
    EXPECT_TRUE(contains(r.out, "tokens: " + std::to_string(ids.size() ) + "\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "documents: " + std::to_string(split.size()) + " ")) << r.out;
    std::string joined;
    for (const auto& text : split) joined += text + "</s>";
    EXPECT_TRUE(contains(r.out, "decoded: " + nlohmann::json(joined).dump() + "\n")) << r.out;
  }

  const auto meta = nlohmann::json::parse(test::read_text(dir.file("out/data.json")));
  EXPECT_EQ(meta["vocab_size"], 300);
  EXPECT_EQ(meta["eos_id"], 1);
  EXPECT_EQ(meta["dtype"], "uint16");
  EXPECT_EQ(meta["train"]["documents"], train_docs.size());
  EXPECT_EQ(meta["val"]["documents"], val_docs.size());
  EXPECT_EQ(meta["train"]["tokens"].get<size_t>() * 2,
            std::filesystem::file_size(dir.file("out/train.bin")));

  // Encoding on one thread gives the same bytes as on two.
  const std::string train_bytes = test::read_text(dir.file("out/train.bin"));
  r = asteria_data(dir, "encode --corpus " + dir.file("corpus.jsonl") + " --tokenizer " +
                            dir.file("tok.model") + " --output-dir " + dir.file("out1") +
                            " --val-every 3 --threads 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::read_text(dir.file("out1/train.bin")), train_bytes);
}

TEST(AsteriaData, BadInputsExitNonZeroNamingTheFile) {
  TempDir dir;
  ProgramRun r = asteria_data(dir, "train-tokenizer --corpus " + dir.file("missing.jsonl") +
                                " --vocab-size 300 --output " + dir.file("tok"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.err, dir.file("missing.jsonl"))) << r.err;

  test::write_bytes(dir.file("bad.jsonl"), {'{', '"', 't', 'e', 'x', 't', '"', ':', '\n'});
  r = asteria_data(dir, "train-tokenizer --corpus " + dir.file("bad.jsonl") +
                            " --vocab-size 300 --output " + dir.file("tok"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, dir.file("bad.jsonl") + " line 1")) << r.err;

  test::write_bytes(dir.file("fake.model"), {'n', 'o', 'p', 'e'});
  write_corpus(dir.file("corpus.jsonl"), sample_documents());
  r = asteria_data(dir, "encode --corpus " + dir.file("corpus.jsonl") + " --tokenizer " +
                            dir.file("fake.model") + " --output-dir " + dir.file("out"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, dir.file("fake.model"))) << r.err;

  test::write_bytes(dir.file("odd.bin"), {1, 0, 2});
  r = asteria_data(dir, "inspect " + dir.file("odd.bin") + " --vocab-size 300");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, dir.file("odd.bin"))) << r.err;
  EXPECT_TRUE(contains(r.err, "not a multiple")) << r.err;

  test::write_u16(dir.file("big.bin"), {1, 2, 300});
  r = asteria_data(dir, "inspect " + dir.file("big.bin") + " --vocab-size 300");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, "token 2 has id 300")) << r.err;

  r = asteria_data(dir, "encode --corpus x");  // missing required options
  EXPECT_EQ(r.status, 2);

  // Nothing half-written was left behind by any of the failures.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.path()))
    EXPECT_FALSE(contains(entry.path().filename().string(), ".tmp")) << entry.path();
  EXPECT_FALSE(std::filesystem::exists(dir.file("tok.model")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.bin")));
}

TEST(AsteriaData, TooFewDocumentsForValidationIsAnError) {
  TempDir dir;
  const auto docs = sample_documents();
  write_corpus(dir.file("corpus.jsonl"), docs);
  ProgramRun r = asteria_data(dir, "train-tokenizer --corpus " + dir.file("corpus.jsonl") +
                                " --vocab-size 300 --output " + dir.file("tok"));
  ASSERT_EQ(r.status, 0) << r.err;
  r = asteria_data(dir, "encode --corpus " + dir.file("corpus.jsonl") + " --tokenizer " +
                            dir.file("tok.model") + " --output-dir " + dir.file("out") +
                            " --val-fraction 0.02");  // every 50th of 9 documents: none
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains(r.err, dir.file("corpus.jsonl"))) << r.err;
  EXPECT_TRUE(contains(r.err, "9 documents")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/train.bin")));
}

// export-tokenizer writes Hugging Face's three files for a model (their encoding is checked in
// Hugging Face's implementation by sentencepiece_to_hf_test.cpp), and encode takes them back as
// --tokenizer only where they are a byte-level BPE: a SentencePiece conversion is refused by name.
TEST(AsteriaData, ExportTokenizerWritesHuggingFacesFiles) {
  TempDir dir;
  write_corpus(dir.file("corpus.jsonl"), sample_documents());
  ASSERT_EQ(asteria_data(dir, "train-tokenizer --corpus " + dir.file("corpus.jsonl") + " --vocab-size 300 --output " +
                                  dir.file("tok")).status, 0);
  ProgramRun r = asteria_data(dir, "export-tokenizer --tokenizer " + dir.file("tok.model") + " --out " + dir.file("hf") +
                                       " --max-length 512");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    EXPECT_TRUE(std::filesystem::exists(dir.file(std::string("hf/") + f))) << f;
  EXPECT_NE(test::read_text(dir.file("hf/tokenizer_config.json")).find("\"model_max_length\": 512"), std::string::npos);
  r = asteria_data(dir, "encode --corpus " + dir.file("corpus.jsonl") + " --tokenizer " + dir.file("hf") + " --output-dir " +
                            dir.file("out"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("hf/tokenizer.json"), std::string::npos) << r.err;
  r = asteria_data(dir, "export-tokenizer --tokenizer " + dir.file("missing.model") + " --out " + dir.file("hf2"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("missing.model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace asteria
