#pragma once
// A text corpus in JSON lines: one document per line, an object with a string "text" and
// optional string "source" and "title" (other keys are ignored; blank lines are skipped).
// The whole corpus is read into memory: corpora here are tens of MB, not the web.
// A malformed line is an asteria::Error naming the file and the line number.
#include <string>
#include <vector>

namespace asteria {

struct CorpusDocument {
  std::string source;
  std::string title;
  std::string text;
};

std::vector<CorpusDocument> read_corpus_jsonl(const std::string& path);

}  // namespace asteria
