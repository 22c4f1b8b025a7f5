#include "hf/hf_weights.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"

namespace asteria::hf {

namespace {

namespace fs = std::filesystem;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); i++) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// The shard files of an index and the file each tensor is in (by file name).
std::map<std::string, std::string> read_index(const fs::path& index) {
  std::ifstream in(index);
  if (!in) fail("cannot open ", index.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(index.string(), ": not valid JSON (", e.what(), ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index.string(), ": no \"weight_map\" object (tensor name -> shard file)");
  std::map<std::string, std::string> where;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) fail(index.string(), ": weight_map[\"", excerpt(it.key()), "\"] is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      fail(index.string(), ": weight_map[\"", excerpt(it.key()), "\"] = \"", excerpt(file),
           "\" is not a file name in the folder");
    where[it.key()] = file;
  }
  if (where.empty()) fail(index.string(), ": weight_map is empty");
  return where;
}

}  // namespace

HfWeights::HfWeights(const std::string& folder, const ModelConfig& cfg) : folder_(folder) {
  const HfFamily family = family_for(cfg, "cannot import the model of");
  const fs::path dir(folder);
  const fs::path index = dir / "model.safetensors.index.json";
  const fs::path single = dir / "model.safetensors";
  // Each tensor's file, and where the index says it is.
  std::map<std::string, const SafetensorsFile*> holder;
  std::map<std::string, std::string> indexed;
  std::error_code ec;
  if (fs::exists(index, ec)) {
    indexed = read_index(index);
    std::map<std::string, const SafetensorsFile*> opened;
    for (const auto& [tensor, name] : indexed) {
      if (opened.count(name)) continue;
      const fs::path p = dir / name;
      if (!fs::exists(p, ec)) fail(index.string(), " names shard ", name, " (for ", excerpt(tensor), "), which is not in ", folder);
      files_.push_back(std::make_unique<SafetensorsFile>(p.string()));
      opened[name] = files_.back().get();
    }
    for (const auto& [tensor, name] : indexed) {
      const SafetensorsFile* f = opened.at(name);
      if (!f->tensors().count(tensor))
        fail(index.string(), " places tensor ", excerpt(tensor), " in ", f->path(), ", which does not hold it");
    }
  } else if (fs::exists(single, ec)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
  } else {
    const bool bin = fs::exists(dir / "pytorch_model.bin", ec) || fs::exists(dir / "pytorch_model.bin.index.json", ec);
    fail(folder, ": no model.safetensors or model.safetensors.index.json",
         bin ? " (it has pytorch_model.bin: Asteria reads safetensors only; save the model with safe_serialization)" : "");
  }
  for (const auto& f : files_)
    for (const auto& [name, t] : f->tensors()) {
      if (!indexed.empty() && indexed.count(name) && indexed.at(name) != fs::path(f->path()).filename().string())
        continue;   // a copy the index does not point at
      if (holder.count(name))
        fail("tensor ", excerpt(name), " is in both ", holder.at(name)->path(), " and ", f->path());
      holder[name] = f.get();
    }

  slots_ = tensor_map(cfg, family);
  std::set<std::string> wanted;
  std::set<std::string> dtypes;
  slots_of_layer_.resize(static_cast<size_t>(cfg.n_layers) + 2);
  for (size_t i = 0; i < slots_.size(); i++) {
    const TensorSlot& s = slots_[i];
    wanted.insert(s.name);
    const auto it = holder.find(s.name);
    if (it == holder.end())
      fail(folder, ": tensor ", s.name, " (", architecture(family), ", ", shape_text(s.shape), ") is missing from ",
           files_.size() == 1 ? files_[0]->path() : "every shard");
    const SafetensorsFile::Tensor& t = it->second->tensors().at(s.name);
    if (t.shape != s.shape)
      fail(it->second->path(), ": tensor ", s.name, " has shape ", shape_text(t.shape), " but config.json gives ",
           shape_text(s.shape));
    dtypes.insert(dtype_name(weight_dtype(t.dtype, it->second->path(), s.name)));
    file_of_.push_back(it->second);
    slots_of_layer_[static_cast<size_t>(s.layer)].push_back(i);
  }
  for (const auto& [name, f] : holder) {
    if (wanted.count(name) || ends_with(name, ".rotary_emb.inv_freq")) continue;
    if (name == "lm_head.weight" && cfg.tied_embeddings) continue;
    fail(f->path(), ": tensor ", excerpt(name), " is not one of ", architecture(family),
         "'s tensors for this config.json (another architecture, or a config.json that does not match the weights?)");
  }
  for (const std::string& d : dtypes) dtypes_ += (dtypes_.empty() ? "" : "+") + d;
}

HfWeights::~HfWeights() = default;

void HfWeights::fill(int layer, size_t begin, size_t count, float* dst) const {
  ASTERIA_ASSERT(layer >= 0 && static_cast<size_t>(layer) < slots_of_layer_.size(), "layer ", layer);
  const size_t end = begin + count;
  size_t covered = 0;
  for (size_t i : slots_of_layer_[static_cast<size_t>(layer)]) {
    const TensorSlot& s = slots_[i];
    const size_t a = std::max(begin, s.layer_begin), b = std::min(end, s.layer_begin + s.numel);
    if (a >= b) continue;
    file_of_[i]->read(s.name, a - s.layer_begin, b - a, dst + (a - begin));
    file_of_[i]->release(s.name);
    covered += b - a;
  }
  ASTERIA_ASSERT(covered == count, "layer ", layer, " elements [", begin, ", ", end, ") not covered by the HF tensors");
}

std::string HfWeights::describe() const {
  return detail::concat("Hugging Face folder ", folder_, " (", slots_.size(), " tensors in ", files_.size(), " file",
                        files_.size() == 1 ? "" : "s", ", ", dtypes_, ")");
}

size_t HfWeights::file_bytes() const {
  size_t n = 0;
  std::error_code ec;
  for (const auto& f : files_) n += fs::file_size(f->path(), ec);
  return n;
}

}  // namespace asteria::hf
