#pragma once
// What SentencePiece trains on. Its trainer reads "sentences" of at most max_sentence_length
// bytes and silently drops longer ones, while a State of the Union address is one 40 kB line.
// So each document is cut at newlines, and lines longer than max_bytes are cut at spaces (at a
// UTF-8 character boundary if a stretch has no space). Cutting at spaces changes nothing the
// trainer learns: with split_by_whitespace no piece crosses a space anyway.
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus_jsonl.hpp"

namespace asteria::data_cli {

std::vector<std::string> training_sentences(const std::vector<CorpusDocument>& docs,
                                            size_t max_bytes);

// An evenly spaced subset (every k-th sentence, k = ceil(total bytes / max_total_bytes)) of about
// max_total_bytes: deterministic, and it samples every part of the corpus.
std::vector<std::string> subsample_sentences(std::vector<std::string> sentences,
                                             int64_t max_total_bytes);

}  // namespace asteria::data_cli
