// The resume policy of every key (OnResume, declared in the schema beside each key) and a resume's
// adoption of the checkpoint's fixed keys (contracts in config.hpp).
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/config_reader.hpp"
#include "config/config_schema.hpp"

namespace asteria {

using config_detail::Origins;
using config_detail::Reader;

namespace {

// Records each key's OnResume under its dotted path.
class PolicyCollector {
 public:
  PolicyCollector(std::string prefix, std::map<std::string, OnResume>& out) : prefix_(std::move(prefix)), out_(out) {}
  template <class T, class Check>
  void field(const char* key, T&, Check, OnResume r) { out_[prefix_ + key] = r; }
  template <class E>
  void choice(const char* key, E&, const std::vector<std::pair<std::string, E>>&, OnResume r, bool = false) {
    out_[prefix_ + key] = r;
  }
  template <class Check>
  void pair(const char* key, double&, double&, Check, OnResume r) { out_[prefix_ + key] = r; }
  void list(const char* key, std::vector<std::string>&, OnResume r) { out_[prefix_ + key] = r; }
  template <class S>
  void section(const char* key, S& sub) {
    PolicyCollector c(prefix_ + key + ".", out_);
    schema::visit(c, sub);
  }

 private:
  std::string prefix_;
  std::map<std::string, OnResume>& out_;
};

}  // namespace

const std::map<std::string, OnResume>& resume_policies() {
  static const std::map<std::string, OnResume> policies = [] {
    std::map<std::string, OnResume> out{{"seed", OnResume::Fixed}};
    Config cfg;
    schema::for_each_section(cfg, [&](const std::string& name, auto& section) {
      PolicyCollector c(name + ".", out);
      schema::visit(c, section);
    });
    return out;
  }();
  return policies;
}

std::vector<std::string> adopt_checkpoint_config(Config& cfg, const Config& saved) {
  // The saved values of the fixed keys this config does not give, read over this config's as if the
  // file had given them (the same reader: types, checks, enums).
  const std::map<std::string, OnResume>& policies = resume_policies();
  YAML::Node tree = YAML::Load(config_to_yaml(saved));
  const std::string before = config_to_yaml(cfg);
  std::vector<std::string> adopted;
  std::set<std::string> keep;
  for (const auto& [key, policy] : policies)
    if (policy == OnResume::Fixed && !cfg.was_given(key)) keep.insert(key);
  std::function<void(YAML::Node, const std::string&)> prune = [&](YAML::Node n, const std::string& prefix) {
    std::vector<std::string> drop;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string key = prefix.empty() ? it->first.Scalar() : prefix + "." + it->first.Scalar();
      if (it->second.IsMap()) prune(it->second, key);
      else if (!keep.count(key)) drop.push_back(it->first.Scalar());
    }
    for (const std::string& k : drop) n.remove(k);
  };
  prune(tree, "");
  Origins origins{"the checkpoint's config", {}};
  if (keep.count("seed")) cfg.seed = saved.seed;
  schema::for_each_section(cfg, [&](const std::string& name, auto& section) {
    const YAML::Node n = tree[name];
    if (!n || !n.IsMap()) return;
    Reader r(n, name, origins);
    schema::visit(r, section);
  });
  // What changed (for the startup line), and the adopted keys count as given from now on: placement
  // keeps them.
  const YAML::Node a = YAML::Load(before), b = YAML::Load(config_to_yaml(cfg));
  for (const std::string& key : keep) {
    YAML::Node x = a, y = b;
    std::stringstream path(key);
    for (std::string part; std::getline(path, part, '.');) {
      x.reset(x[part]);
      y.reset(y[part]);
    }
    YAML::Emitter ex, ey;
    ex << YAML::Flow << x;
    ey << YAML::Flow << y;
    if (std::string(ex.c_str()) != ey.c_str()) adopted.push_back(key + ": " + ey.c_str() + " (this config: " + ex.c_str() + ")");
    cfg.given.insert(key);
  }
  return adopted;
}

}  // namespace asteria
