#include "training_sentences.hpp"

#include <string_view>

namespace asteria::data_cli {

namespace {

bool is_utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

void cut_line(std::string_view line, size_t max_bytes, std::vector<std::string>& out) {
  while (line.size() > max_bytes) {
    size_t cut = line.rfind(' ', max_bytes);
    if (cut == std::string_view::npos || cut == 0) {
      cut = max_bytes;
      while (cut > 1 && is_utf8_continuation(line[cut])) --cut;
    }
    out.emplace_back(line.substr(0, cut));
    line.remove_prefix(cut);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  }
  if (line.find_first_not_of(' ') != std::string_view::npos) out.emplace_back(line);
}

}  // namespace

std::vector<std::string> training_sentences(const std::vector<CorpusDocument>& docs,
                                            size_t max_bytes) {
  std::vector<std::string> out;
  for (const auto& doc : docs) {
    std::string_view text = doc.text;
    while (!text.empty()) {
      const size_t nl = text.find('\n');
      cut_line(text.substr(0, nl), max_bytes, out);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    }
  }
  return out;
}

std::vector<std::string> subsample_sentences(std::vector<std::string> sentences,
                                             int64_t max_total_bytes) {
  int64_t total = 0;
  for (const auto& s : sentences) total += static_cast<int64_t>(s.size());
  if (total <= max_total_bytes) return sentences;
  const int64_t stride = (total + max_total_bytes - 1) / max_total_bytes;
  std::vector<std::string> kept;
  for (size_t i = 0; i < sentences.size(); i += static_cast<size_t>(stride))
    kept.push_back(std::move(sentences[i]));
  return kept;
}

}  // namespace asteria::data_cli
