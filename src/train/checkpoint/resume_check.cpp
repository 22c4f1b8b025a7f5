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

}  // namespace

std::vector<std::string> check_resume_compatible(const Config& saved, const Config& now, const Manifest& manifest,
                                                 const std::string& checkpoint_dir, int ranks) {
  const auto a = flatten(saved), b = flatten(now);
  const std::map<std::string, OnResume>& policies = resume_policies();
  std::string diffs;
  std::vector<std::string> placement;
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    const std::string other = it == b.end() ? "(absent)" : it->second;
    if (other == value || covered(key, now.checkpoint.allow_changes)) continue;
    const auto p = policies.find(key);
    const OnResume policy = p == policies.end() ? OnResume::Fixed : p->second;   // a key of an older schema
    if (policy == OnResume::Free) continue;
    if (policy == OnResume::Placement) {
      placement.push_back(key + ": " + excerpt(value) + " -> " + excerpt(other));
      continue;
    }
    diffs += "\n  " + key + ": " + excerpt(value) + " in the checkpoint, " + excerpt(other) + " now";
  }
  if (!diffs.empty())
    fail("cannot resume from ", checkpoint_dir, ": these keys differ from its config and may not change on resume "
         "(list them in checkpoint.allow_changes to accept that):", diffs);
  // The global batch: the checkpoint's from its tokens per step, where they divide evenly.
  const int64_t per_step = saved.model.seq_len > 0 && manifest.step > 0 ? manifest.tokens / manifest.step : 0;
  const bool known = per_step > 0 && manifest.tokens % manifest.step == 0 && per_step % saved.model.seq_len == 0;
  const int64_t was = known ? per_step / saved.model.seq_len : 0;
  const int64_t is = int64_t{ranks} * now.train.micro_batch * now.train.grad_accum;
  if (known && was != is && !covered("train.micro_batch", now.checkpoint.allow_changes) &&
      !covered("train.grad_accum", now.checkpoint.allow_changes))
    fail("cannot resume from ", checkpoint_dir, ": its global batch is ", was, " instances per step but this launch's is ",
         is, " (", ranks, " rank(s) x train.micro_batch ", now.train.micro_batch, " x train.grad_accum ",
         now.train.grad_accum, "); set train.micro_batch / train.grad_accum to keep it, or list train.micro_batch in "
         "checkpoint.allow_changes to change it");
  for (const DataFingerprint& d : manifest.data) {
    if (d.role != "train" || covered("data.train", now.checkpoint.allow_changes)) continue;
    const DataFingerprint cur = token_file_fingerprint("train", now.data.train);
    if (cur.bytes != d.bytes || cur.fingerprint != d.fingerprint)
      fail("cannot resume from ", checkpoint_dir, ": data.train '", now.data.train, "' is not the token file it was "
           "trained on ('", d.path, "', ", d.bytes, " bytes, fingerprint ", d.fingerprint, "; now ", cur.bytes,
           " bytes, fingerprint ", cur.fingerprint, ")");
  }
  return placement;
}

}  // namespace asteria
