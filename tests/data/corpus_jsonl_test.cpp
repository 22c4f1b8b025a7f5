#include "data/corpus_jsonl.hpp"

#include "test_files.hpp"

namespace asteria {
namespace {

using test::expect_error;
using test::TempDir;

void write(const std::string& path, const std::string& text) {
  test::write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(CorpusJsonl, ReadsDocumentsInOrder) {
  TempDir dir;
  write(dir.file("c.jsonl"),
        "{\"source\": \"a\", \"title\": \"One\", \"text\": \"first\\nline\"}\n"
        "\n"
        "{\"text\": \"caf\\u00e9 \\u2014 no title\", \"extra\": 3}\n");
  const auto docs = read_corpus_jsonl(dir.file("c.jsonl"));
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].source, "a");
  EXPECT_EQ(docs[0].title, "One");
  EXPECT_EQ(docs[0].text, "first\nline");
  EXPECT_EQ(docs[1].source, "");
  EXPECT_EQ(docs[1].text, "caf\xc3\xa9 \xe2\x80\x94 no title");
}

TEST(CorpusJsonl, ErrorsNameTheFileAndLine) {
  TempDir dir;
  expect_error([&] { read_corpus_jsonl(dir.file("none.jsonl")); },
               {dir.file("none.jsonl"), "cannot open"});
  write(dir.file("bad.jsonl"), "{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n");
  expect_error([&] { read_corpus_jsonl(dir.file("bad.jsonl")); },
               {dir.file("bad.jsonl"), "line 2", "not valid JSON"});
  write(dir.file("notext.jsonl"), "{\"text\": \"ok\"}\n\n{\"title\": \"t\"}\n");
  expect_error([&] { read_corpus_jsonl(dir.file("notext.jsonl")); },
               {dir.file("notext.jsonl"), "line 3", "\"text\""});
  write(dir.file("array.jsonl"), "[1, 2]\n");
  expect_error([&] { read_corpus_jsonl(dir.file("array.jsonl")); }, {"line 1", "object"});
  write(dir.file("title.jsonl"), "{\"text\": \"x\", \"title\": 5}\n");
  expect_error([&] { read_corpus_jsonl(dir.file("title.jsonl")); }, {"line 1", "\"title\""});
  write(dir.file("empty.jsonl"), "\n\n");
  expect_error([&] { read_corpus_jsonl(dir.file("empty.jsonl")); },
               {dir.file("empty.jsonl"), "no documents"});
}

}  // namespace
}  // namespace asteria
