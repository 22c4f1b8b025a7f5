#include "data/byte_level_bpe.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/error.hpp"

namespace asteria {

namespace {

using nlohmann::json;

// JavaScript's \s (ECMAScript WhiteSpace and LineTerminator), which @huggingface/tokenizers'
// fixed GPT-2 pattern uses, and Unicode's White_Space, which it puts for \s in a file's pattern.
constexpr const char* kJsSpace = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";
constexpr const char* kWhiteSpace = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string gpt2_pattern() {
  const std::string s = kJsSpace;
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + s + "\\p{L}\\p{N}]+|[" + s + "]+(?![^" + s + "])|[" + s + "]+";
}

// A file's Split pattern as the JavaScript implementation reads it: \s as White_Space (in and out
// of classes), and (?i:...) folding ASCII letters only. `where` names the file for errors.
std::string translate_pattern(const std::string& p, const std::string& where) {
  std::string out;
  int class_depth = 0;   // inside [...]
  int caseless_open = -1, depth = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += class_depth ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S') {
        if (class_depth) fail(where, ": the pre-tokenizer's pattern uses \\S inside a class, which is not supported");
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += p.substr(i, 2);
      }
      ++i;
      continue;
    }
    if (class_depth == 0 && p.compare(i, 4, "(?i:") == 0) {
      if (caseless_open >= 0) fail(where, ": nested (?i:...) groups in the pre-tokenizer's pattern are not supported");
      caseless_open = depth++;
      out += "(?:";
      i += 3;
      continue;
    }
    if (c == '[') ++class_depth;
    if (c == ']' && class_depth) --class_depth;
    if (class_depth == 0 && c == '(') ++depth;
    if (class_depth == 0 && c == ')' && --depth == caseless_open) caseless_open = -1;
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (caseless_open >= 0 && letter) {
      if (class_depth) fail(where, ": a class inside (?i:...) in the pre-tokenizer's pattern is not supported");
      out += std::string("[") + static_cast<char>(c | 0x20) + static_cast<char>(c & ~0x20) + "]";
    } else {
      out += c;
    }
  }
  return out;
}

// A compiled PCRE2 pattern (UTF, Unicode properties; JIT where available).
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& where) : where_(where) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK,
                          &err, &offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail(where, ": cannot compile the pattern ", pattern, " at offset ", offset, ": ", reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls f(begin, end) for each match in s, left to right (empty matches skipped).
  template <class F>
  void for_each_match(std::string_view s, F f) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t at = 0;
    while (at <= s.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {   // a resource limit (the JIT stack, backtracking): never skip text silently
        pcre2_match_data_free(md);
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail(where_, ": the pattern failed on a text of ", s.size(), " bytes at byte ", at, ": ", reinterpret_cast<char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] == ov[0]) {   // an empty match: step over one character
        at = ov[1] + 1;
        while (at < s.size() && (static_cast<unsigned char>(s[at]) & 0xC0) == 0x80) ++at;
        continue;
      }
      f(ov[0], ov[1]);
      at = ov[1];
    }
    pcre2_match_data_free(md);
  }

 private:
  std::string where_;
  pcre2_code* code_ = nullptr;
};

// The text as TextDecoder reads it: each maximal ill-formed subsequence becomes U+FFFD (WHATWG's
// UTF-8 decoder), so the pieces below are valid UTF-8.
std::string well_formed(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(in[k]); };
  while (i < in.size()) {
    const unsigned char b = byte(i);
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) { out += static_cast<char>(b); ++i; continue; }
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b >= 0xE0 && b <= 0xEF) { need = 2; if (b == 0xE0) lo = 0xA0; if (b == 0xED) hi = 0x9F; }
    else if (b >= 0xF0 && b <= 0xF4) { need = 3; if (b == 0xF0) lo = 0x90; if (b == 0xF4) hi = 0x8F; }
    else { out += "\xEF\xBF\xBD"; ++i; continue; }
    size_t k = i + 1;
    int got = 0;
    for (; got < need && k < in.size(); ++got, ++k) {
      const unsigned char c = byte(k);
      if (c < lo || c > hi) break;
      lo = 0x80;
      hi = 0xBF;
    }
    if (got == need) out.append(in.substr(i, k - i));
    else out += "\xEF\xBF\xBD";
    i = k;
  }
  return out;
}

// NFC by length (utf8proc_NFC would stop at the first NUL, which text may hold).
std::string nfc(const std::string& s) {
  utf8proc_uint8_t* r = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                                          &r, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return s;
  std::string out(reinterpret_cast<char*>(r), static_cast<size_t>(n));
  std::free(r);
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's byte characters: printable bytes stand for themselves, the others for 256 + n in order.
std::vector<std::string> byte_characters() {
  std::vector<std::string> chars(256);
  uint32_t n = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    append_utf8(chars[b], printable ? b : 256 + n++);
  }
  return chars;
}

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
};

std::string escape_literal(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) out += static_cast<char>(c);
    else { char buf[8]; std::snprintf(buf, sizeof buf, "\\x{%02X}", c); out += buf; }
  }
  return out;
}

std::string json_type(const json& j) { return j.is_object() && j.contains("type") ? j["type"].get<std::string>() : "?"; }

}  // namespace

struct ByteLevelBpe::Impl {
  std::string where;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> token_of;             // by id (model and added tokens)
  std::vector<char> special;                      // by id
  std::vector<char> added;                        // by id
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;   // (left, right) -> (rank, merged id)
  std::vector<std::string> byte_chars = byte_characters();   // by byte
  int32_t byte_id[256] = {};
  std::unordered_map<uint32_t, uint8_t> byte_of_char;   // decoding
  std::vector<AddedToken> added_tokens;
  std::unique_ptr<Regex> added_re, split_re;
  bool nfc = false, ignore_merges = false;
  enum class Keep { Matches, Gaps, Both } keep = Keep::Matches;
  int32_t eos = -1;

  void read_model(const json& m);
  void read_pre_tokenizer(const json& p);
  void add_word(std::string_view word, std::vector<int32_t>& ids) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
};

namespace {

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

}  // namespace

void ByteLevelBpe::Impl::read_model(const json& m) {
  if (json_type(m) != "BPE") fail(where, ": model type ", json_type(m), " is not supported (only BPE)");
  if (m.value("byte_fallback", false)) fail(where, ": model.byte_fallback true is not supported");
  if (m.contains("dropout") && !m["dropout"].is_null()) fail(where, ": model.dropout is not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty()) fail(where, ": model.", k, " is not supported");
  ignore_merges = m.value("ignore_merges", false);
  for (const auto& [token, id] : m.at("vocab").items()) {
    vocab[token] = id.get<int32_t>();
    if (id.get<int32_t>() >= static_cast<int32_t>(token_of.size())) token_of.resize(id.get<size_t>() + 1);
    token_of[id.get<size_t>()] = token;
  }
  const std::vector<std::string>& chars = byte_chars;
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab.find(chars[b]);
    if (it == vocab.end()) fail(where, ": the vocabulary lacks byte ", b, "'s character: not a byte-level BPE");
    byte_id[b] = it->second;
    const unsigned char* u = reinterpret_cast<const unsigned char*>(chars[b].data());
    const uint32_t cp = chars[b].size() == 1 ? u[0] : ((u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    byte_of_char[cp] = static_cast<uint8_t>(b);
  }
  int32_t rank = 0;
  for (const json& merge : m.at("merges")) {
    std::string a, b;
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) fail(where, ": merge ", rank, " (\"", s, "\") is not two tokens");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      a = merge.at(0).get<std::string>();
      b = merge.at(1).get<std::string>();
    }
    const auto ia = vocab.find(a), ib = vocab.find(b), im = vocab.find(a + b);
    // A merge whose parts or result are not in the vocabulary never applies (as Hugging Face).
    if (ia != vocab.end() && ib != vocab.end() && im != vocab.end()) merges.try_emplace(pair_key(ia->second, ib->second), rank, im->second);
    ++rank;
  }
}

void ByteLevelBpe::Impl::read_pre_tokenizer(const json& p) {
  auto byte_level = [&](const json& b, bool split_before) {
    if (b.value("add_prefix_space", false)) fail(where, ": pre_tokenizer ByteLevel add_prefix_space true is not supported");
    if (b.value("use_regex", true)) {
      if (split_before) fail(where, ": a Split followed by ByteLevel with use_regex true is not supported");
      split_re = std::make_unique<Regex>(gpt2_pattern(), where);
      keep = Keep::Matches;
    }
  };
  if (json_type(p) == "ByteLevel") return byte_level(p, false);
  if (json_type(p) != "Sequence") fail(where, ": pre_tokenizer ", json_type(p), " is not supported (ByteLevel, or Split then ByteLevel)");
  const json& seq = p.at("pretokenizers");
  if (seq.size() != 2 || json_type(seq[0]) != "Split" || json_type(seq[1]) != "ByteLevel")
    fail(where, ": this pre_tokenizer Sequence is not supported (only Split then ByteLevel)");
  const json& split = seq[0];
  if (!split.at("pattern").contains("Regex")) fail(where, ": a Split by a String pattern is not supported (only Regex)");
  const std::string behavior = split.value("behavior", "");
  const bool invert = split.value("invert", false);
  if (behavior == "Isolated" && !invert) keep = Keep::Both;
  else if (behavior == "Removed") keep = invert ? Keep::Matches : Keep::Gaps;
  else fail(where, ": Split behavior ", behavior, invert ? " (inverted)" : "", " is not supported (Isolated, Removed)");
  split_re = std::make_unique<Regex>(translate_pattern(split["pattern"]["Regex"].get<std::string>(), where), where);
  byte_level(seq[1], true);
}

// One pre-tokenized word's ids: BPE over its bytes, the lowest-ranked pair first (leftmost on ties).
void ByteLevelBpe::Impl::add_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (ignore_merges) {
    std::string mapped;
    for (unsigned char b : word) mapped += byte_chars[b];
    if (const auto it = vocab.find(mapped); it != vocab.end()) return ids.push_back(it->second);
  }
  struct Candidate {
    int32_t rank, pos, left, right;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  // Each thread's buffers, reused word after word (encoding allocates nothing per word).
  thread_local std::vector<int32_t> id, next, prev;
  thread_local std::vector<Candidate> heap;   // a min-heap by (rank, pos)
  const int n = static_cast<int>(word.size());
  id.resize(n);
  next.resize(n);
  prev.resize(n);
  heap.clear();
  for (int i = 0; i < n; ++i) {
    id[i] = byte_id[static_cast<unsigned char>(word[i])];
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  auto consider = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    if (const auto it = merges.find(pair_key(id[i], id[next[i]])); it != merges.end()) {
      heap.push_back({it->second.first, i, id[i], id[next[i]]});
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const Candidate c = heap.back();
    heap.pop_back();
    const int j = next[c.pos];
    if (id[c.pos] != c.left || j < 0 || id[j] != c.right) continue;   // stale
    id[c.pos] = merges.at(pair_key(c.left, c.right)).second;
    id[j] = -1;
    next[c.pos] = next[j];
    if (next[j] >= 0) prev[next[j]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  for (int i = 0; i >= 0 && i < n; i = next[i]) ids.push_back(id[i]);
}

void ByteLevelBpe::Impl::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  const std::string normalized = nfc ? asteria::nfc(std::string(piece)) : std::string(piece);
  const std::string_view s = normalized;
  if (!split_re) return add_word(s, ids);
  size_t last = 0;
  split_re->for_each_match(s, [&](size_t b, size_t e) {
    if (b > last && keep != Keep::Matches) add_word(s.substr(last, b - last), ids);
    if (keep != Keep::Gaps) add_word(s.substr(b, e - b), ids);
    last = e;
  });
  if (last < s.size() && keep != Keep::Matches) add_word(s.substr(last), ids);
}

ByteLevelBpe::ByteLevelBpe(const std::string& path) : impl_(std::make_unique<Impl>()) {
  namespace fs = std::filesystem;
  Impl& m = *impl_;
  const fs::path file = fs::is_directory(path) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  m.where = file.string();
  std::ifstream in(file);
  if (!in) fail("cannot read tokenizer ", m.where);
  json j;
  try {
    j = json::parse(in);
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      if (json_type(j["normalizer"]) != "NFC") fail(m.where, ": normalizer ", json_type(j["normalizer"]), " is not supported (none, NFC)");
      m.nfc = true;
    }
    m.read_model(j.at("model"));
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) m.read_pre_tokenizer(j["pre_tokenizer"]);
    if (j.contains("decoder") && !j["decoder"].is_null() && json_type(j["decoder"]) != "ByteLevel")
      fail(m.where, ": decoder ", json_type(j["decoder"]), " is not supported (ByteLevel)");
    std::string alternation;
    std::vector<AddedToken> by_length;
    for (const json& a : j.value("added_tokens", json::array())) {
      for (const char* k : {"single_word", "lstrip", "rstrip"})
        if (a.value(k, false)) fail(m.where, ": added token ", a.at("content").dump(), " has ", k, " true, which is not supported");
      AddedToken t{a.at("id").get<int32_t>(), a.at("content").get<std::string>(), a.value("special", false)};
      m.added_tokens.push_back(t);
      by_length.push_back(t);
    }
    // Leftmost, then longest: PCRE2 takes the first alternative that matches at a position.
    std::stable_sort(by_length.begin(), by_length.end(), [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (const AddedToken& t : by_length) alternation += (alternation.empty() ? "" : "|") + escape_literal(t.content);
    if (!alternation.empty()) m.added_re = std::make_unique<Regex>(alternation, m.where);
  } catch (const json::exception& e) {
    fail(m.where, ": not a Hugging Face tokenizer.json: ", e.what());
  }
  for (const AddedToken& t : m.added_tokens) {
    if (t.id >= static_cast<int32_t>(m.token_of.size())) m.token_of.resize(static_cast<size_t>(t.id) + 1);
    m.token_of[static_cast<size_t>(t.id)] = t.content;
  }
  m.special.assign(m.token_of.size(), 0);
  m.added.assign(m.token_of.size(), 0);
  for (const AddedToken& t : m.added_tokens) {
    m.special[static_cast<size_t>(t.id)] = t.special;
    m.added[static_cast<size_t>(t.id)] = 1;
  }
  // The end-of-document token: tokenizer_config.json's eos_token beside the file, else <|endoftext|>.
  std::string eos = "<|endoftext|>";
  if (std::ifstream cfg(file.parent_path() / "tokenizer_config.json"); cfg) {
    try {
      const json c = json::parse(cfg);
      if (c.contains("eos_token") && c["eos_token"].is_string()) eos = c["eos_token"].get<std::string>();
      if (c.contains("eos_token") && c["eos_token"].is_object()) eos = c["eos_token"].at("content").get<std::string>();
    } catch (const json::exception& e) {
      fail((file.parent_path() / "tokenizer_config.json").string(), ": cannot read it: ", e.what());
    }
  }
  for (const AddedToken& t : m.added_tokens)
    if (t.content == eos) m.eos = t.id;
  if (m.eos < 0) fail(m.where, ": no added token ", eos, " to end each document with (tokenizer_config.json's eos_token)");
}

ByteLevelBpe::~ByteLevelBpe() = default;
ByteLevelBpe::ByteLevelBpe(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe& ByteLevelBpe::operator=(ByteLevelBpe&&) noexcept = default;

int64_t ByteLevelBpe::vocab_size() const { return static_cast<int64_t>(impl_->token_of.size()); }
int32_t ByteLevelBpe::eos_id() const { return impl_->eos; }

std::vector<int32_t> ByteLevelBpe::encode(std::string_view text) const {
  const Impl& m = *impl_;
  const std::string s = well_formed(text);
  std::vector<int32_t> ids;
  size_t last = 0;
  auto piece = [&](size_t b, size_t e) {
    if (e > b) m.encode_piece(std::string_view(s).substr(b, e - b), ids);
  };
  if (m.added_re) {
    m.added_re->for_each_match(s, [&](size_t b, size_t e) {
      piece(last, b);
      const std::string content = s.substr(b, e - b);
      for (const AddedToken& t : m.added_tokens)
        if (t.content == content) {
          ids.push_back(t.id);
          break;
        }
      last = e;
    });
  }
  piece(last, s.size());
  return ids;
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids) const {
  const Impl& m = *impl_;
  std::string out;
  for (int32_t id : ids) {
    ASTERIA_CHECK(id >= 0 && id < vocab_size(), m.where, ": id ", id, " is outside the vocabulary of ", vocab_size());
    const std::string& t = m.token_of[static_cast<size_t>(id)];
    if (m.added[static_cast<size_t>(id)]) {
      if (!m.special[static_cast<size_t>(id)]) out += t;
      continue;
    }
    const unsigned char* u = reinterpret_cast<const unsigned char*>(t.data());
    for (size_t i = 0; i < t.size();) {
      uint32_t cp = u[i];
      size_t len = 1;
      if (cp >= 0xC0 && cp < 0xE0 && i + 1 < t.size()) {
        cp = ((cp & 0x1F) << 6) | (u[i + 1] & 0x3F);
        len = 2;
      }
      const auto it = m.byte_of_char.find(cp);
      if (it != m.byte_of_char.end()) out += static_cast<char>(it->second);
      else out.append(t, i, len);
      i += len;
    }
  }
  return out;
}

std::string ByteLevelBpe::piece(int32_t id) const {
  ASTERIA_CHECK(id >= 0 && id < vocab_size(), impl_->where, ": id ", id, " is outside the vocabulary of ", vocab_size());
  return impl_->token_of[static_cast<size_t>(id)];
}

bool is_hf_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_directory(path)) return fs::exists(fs::path(path) / "tokenizer.json");
  return fs::path(path).extension() == ".json";
}

}  // namespace asteria
