#include "data/corpus_jsonl.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace asteria {

namespace {

std::string optional_string(const nlohmann::json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) fail(where, ": \"", key, "\" is not a string");
  return it->get<std::string>();
}

}  // namespace

std::vector<CorpusDocument> read_corpus_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open corpus ", path, ": ", std::strerror(errno));
  std::vector<CorpusDocument> docs;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + " line " + std::to_string(line_no);
    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      fail(where, ": not valid JSON (", e.what(), ")");
    }
    if (!obj.is_object()) fail(where, ": expected a JSON object {\"text\": ...}");
    auto text = obj.find("text");
    if (text == obj.end() || !text->is_string())
      fail(where, ": missing string field \"text\"");
    docs.push_back({optional_string(obj, "source", where), optional_string(obj, "title", where),
                    text->get<std::string>()});
  }
  if (in.bad()) fail("cannot read corpus ", path, ": ", std::strerror(errno));
  if (docs.empty()) fail("corpus ", path, " has no documents");
  return docs;
}

}  // namespace asteria
