// The config reference (docs/configuration.md): it names every key the resolved config holds,
// and its defaults are the ones the reader applies.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <functional>

#include "config/config.hpp"
#include "config/config_reference.hpp"

using namespace asteria;

namespace {

// Every dotted key of the resolved config as config_to_yaml writes it.
std::vector<std::string> written_keys(const Config& cfg) {
  std::vector<std::string> keys;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n, const std::string& key) {
    if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it)
        walk(it->second, key.empty() ? it->first.Scalar() : key + "." + it->first.Scalar());
      return;
    }
    keys.push_back(key);
  };
  walk(YAML::Load(config_to_yaml(cfg)), "");
  return keys;
}

}  // namespace

TEST(ConfigReference, NamesEveryKeyOfTheResolvedConfig) {
  const std::string md = config_reference_markdown();
  const std::vector<std::string> keys = written_keys(Config{});
  EXPECT_GT(keys.size(), 90u);
  for (const std::string& k : keys) EXPECT_NE(md.find("| `" + k + "` |"), std::string::npos) << k;
}

TEST(ConfigReference, ShowsTheDefaultsAndEachOptimizersOwn) {
  const std::string md = config_reference_markdown();
  EXPECT_NE(md.find("| `train.steps` | integer | `100` | >= 1 |"), std::string::npos);
  EXPECT_NE(md.find("`auto` | one of: auto, workers, compute, device |"), std::string::npos);
  // optim_defaults: SOAP's lr and betas in the per-optimizer table.
  const size_t table = md.find("## Defaults per optimizer");
  ASSERT_NE(table, std::string::npos);
  EXPECT_NE(md.find("| `optim.lr` | `4e-04` | `0.01` | `0.003` | `1e-04` |", table), std::string::npos);
}
