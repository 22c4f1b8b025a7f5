#pragma once
// Internal to config/: reading a config section from YAML through the schema (config_schema.hpp),
// with messages naming FILE:LINE or the --set argument of each key. Used by load_config and by a
// resume adopting the checkpoint's fixed keys (resume_policy.cpp), so that both read alike
// (types, checks, enums).
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config_schema.hpp"
#include "core/error.hpp"

namespace asteria::config_detail {

// Where each key came from, for messages: the --set argument, or FILE:LINE.
struct Origins {
  std::string file;
  std::map<std::string, std::string> overrides;  // dotted key -> the --set argument

  std::string where(const std::string& key, const YAML::Node& node) const {
    // An override of the key itself or of a section above it.
    for (std::string k = key;;) {
      auto it = overrides.find(k);
      if (it != overrides.end()) return "--set " + excerpt(it->second);
      auto dot = k.rfind('.');
      if (dot == std::string::npos) break;
      k.resize(dot);
    }
    if (node && node.Mark().line >= 0)
      return file + ":" + std::to_string(node.Mark().line + 1);
    return file;
  }
};

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else return "a string";
}

// A value as messages echo it (cut when long).
inline std::string node_text(const YAML::Node& n) {
  if (n.IsScalar()) return excerpt(n.Scalar());
  YAML::Emitter e;
  e << YAML::Flow << n;
  return excerpt(e.c_str());
}

// Parses a scalar strictly: "1.5" is not an int, "yes" is not a number.
template <class T>
bool parse_scalar(const YAML::Node& n, T& out) {
  if (!n.IsScalar()) return false;
  const std::string& s = n.Scalar();
  if constexpr (std::is_same_v<T, bool>) {
    if (s == "true" || s == "True") return out = true, true;
    if (s == "false" || s == "False") return out = false, true;
    return false;
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = s;
    return true;
  } else {
    const char* b = s.data();
    const char* e = s.data() + s.size();
    if (b != e && *b == '+') ++b;
    auto [p, ec] = std::from_chars(b, e, out);
    return ec == std::errc() && p == e;
  }
}

class Reader {
 public:
  Reader(const YAML::Node& node, std::string section, const Origins& origins)
      : node_(node), section_(std::move(section)), origins_(origins) {}

  template <class T, class Check>
  void field(const char* key, T& out, Check check, OnResume) {
    seen_.insert(key);
    const YAML::Node n = node_[key];
    if (!n) return;
    T value{};
    if (!parse_scalar(n, value))
      fail(where(key, n), ": '", path(key), "' must be ", type_name<T>(), ", got '", node_text(n), "'");
    std::string err = check(value);
    if (!err.empty())
      fail(where(key, n), ": '", path(key), "' = ", node_text(n), " is invalid: it ", err);
    out = value;
  }

  template <class E>
  void choice(const char* key, E& out, std::vector<std::pair<std::string, E>> names, OnResume on_resume,
              bool /*quoted*/ = false) {
    std::string s;
    std::vector<std::string> all;
    for (auto& [name, e] : names) all.push_back(name);
    const YAML::Node n = node_[key];
    if (!n) {
      seen_.insert(key);
      return;
    }
    field(key, s, schema::one_of(all), on_resume);
    for (auto& [name, e] : names)
      if (name == s) out = e;
  }

  template <class Check>
  void pair(const char* key, double& a, double& b, Check check, OnResume) {
    seen_.insert(key);
    const YAML::Node n = node_[key];
    if (!n) return;
    double v[2];
    bool ok = n.IsSequence() && n.size() == 2 && parse_scalar(n[0], v[0]) && parse_scalar(n[1], v[1]);
    if (!ok)
      fail(where(key, n), ": '", path(key), "' must be a list of two numbers, got '", node_text(n), "'");
    for (double x : v) {
      std::string err = check(x);
      if (!err.empty())
        fail(where(key, n), ": '", path(key), "' = ", node_text(n), " is invalid: each value ", err);
    }
    a = v[0];
    b = v[1];
  }

  void list(const char* key, std::vector<std::string>& out, OnResume) {
    seen_.insert(key);
    const YAML::Node n = node_[key];
    if (!n) return;
    std::vector<std::string> v;
    bool ok = n.IsSequence();
    for (size_t i = 0; ok && i < n.size(); ++i) ok = n[i].IsScalar() && (v.push_back(n[i].Scalar()), true);
    if (!ok) fail(where(key, n), ": '", path(key), "' must be a list of strings, got '", node_text(n), "'");
    out = std::move(v);
  }

  template <class S>
  void section(const char* key, S& sub) {
    seen_.insert(key);
    const YAML::Node n = node_[key];
    if (!n || n.IsNull()) return;
    if (!n.IsMap()) fail(where(key, n), ": section '", path(key), "' must be a mapping");
    Reader r(n, path(key), origins_);
    schema::visit(r, sub);
    r.reject_unknown();
  }

  // Every key of the section that no field read is an error.
  void reject_unknown() const {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      std::string key = it->first.Scalar();
      if (seen_.count(key)) continue;
      std::string known;
      for (auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      fail(where(key, it->first), ": unknown key '", excerpt(path(key)), "' (known keys in ", section_,
           ": ", known, ")");
    }
  }

 private:
  std::string path(const std::string& key) const { return section_ + "." + key; }
  std::string where(const std::string& key, const YAML::Node& n) const {
    return origins_.where(path(key), n);
  }
  const YAML::Node node_;
  std::string section_;
  const Origins& origins_;
  std::set<std::string> seen_;
};

}  // namespace asteria::config_detail
