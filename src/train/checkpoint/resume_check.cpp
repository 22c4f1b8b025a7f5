#include "train/checkpoint/resume_check.hpp"

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>

#include "core/error.hpp"

namespace asteria {

namespace {

// The resolved config as dotted key -> value text.
std::map<std::string, std::string> flatten(const Config& cfg) {
  std::map<std::string, std::string> out;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n, const std::string& key) {
    if (n.IsMap()) {
      for (auto it = n.begin(); it != n.end(); ++it)
        walk(it->second, key.empty() ? it->first.Scalar() : key + "." + it->first.Scalar());
      return;
    }
    YAML::Emitter e;
    e << YAML::Flow << n;
    out[key] = e.c_str();
  };
  walk(YAML::Load(config_to_yaml(cfg)), "");
  return out;
}

bool covered(const std::string& key, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    if (key == p || key.rfind(p + ".", 0) == 0) return true;
  return false;
}

const std::vector<std::string> kMayChange = {
    "train.steps", "train.stop_after", "model.head_chunk", "model.attention",
    // Read at a fresh start only: a resumed run's parameters are the checkpoint's.
    "model.init_from",
    "train.activation_recompute", "train.recompute_every_k", "train.eval_every", "data.eval", "data.eval_batches", "data.train",
    "checkpoint",  "run",              "runtime.threads", "runtime.blas",  "runtime.shadow.threads", "runtime.shadow.lane",
    "runtime.shadow.worker_delay_ms", "runtime.tiers", "distributed.timeout_s", "distributed.ranks_per_node",
    // How versions travel changes no bit (the staleness and tolerance do: they need allow_changes).
    "runtime.coherence.hierarchical",
    // The state is stored in global form: how ranks share it may change with the launch.
    "distributed.fsdp", "distributed.prefetch", "distributed.check_every_step", "distributed.check_every",
    "distributed.world_size"};

}  // namespace

void check_resume_compatible(const Config& saved, const Config& now, const Manifest& manifest,
                             const std::string& checkpoint_dir) {
  const auto a = flatten(saved), b = flatten(now);
  std::string diffs;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    const std::string other = it == b.end() ? "(absent)" : it->second;
    if (other == value || covered(key, kMayChange) || covered(key, now.checkpoint.allow_changes)) continue;
    diffs += "\n  " + key + ": " + excerpt(value) + " in the checkpoint, " + excerpt(other) + " now";
  }
  if (!diffs.empty())
    fail("cannot resume from ", checkpoint_dir, ": these keys differ from its config and may not change on resume "
         "(list them in checkpoint.allow_changes to accept that):", diffs);
  for (const DataFingerprint& d : manifest.data) {
    if (d.role != "train" || covered("data.train", now.checkpoint.allow_changes)) continue;
    const DataFingerprint cur = token_file_fingerprint("train", now.data.train);
    if (cur.bytes != d.bytes || cur.fingerprint != d.fingerprint)
      fail("cannot resume from ", checkpoint_dir, ": data.train '", now.data.train, "' is not the token file it was "
           "trained on ('", d.path, "', ", d.bytes, " bytes, fingerprint ", d.fingerprint, "; now ", cur.bytes,
           " bytes, fingerprint ", cur.fingerprint, ")");
  }
}

}  // namespace asteria
