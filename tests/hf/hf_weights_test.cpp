// hf/hf_weights.hpp: a folder's tensors checked against the model and read into the layers' flat
// buffers, whole or by any rank's range, from one file or from shards; every mismatch refused
// naming the file and the tensor.
#include "hf/hf_weights.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "hf/hf_tensor_map.hpp"
#include "hf_test_files.hpp"
#include "model/model.hpp"
#include "test_util.hpp"

namespace asteria::hf {
namespace {

using testing::RawTensor;
using testing::TempDir;

ModelConfig olmo2_model(bool tied) {
  ModelConfig m;
  m.d_model = 16;
  m.n_layers = 2;
  m.n_heads = 2;
  m.mlp_hidden = 24;
  m.vocab_size = 30;
  m.embedding_size = 32;
  m.seq_len = 8;
  m.tied_embeddings = tied;
  apply_family(HfFamily::Olmo2, m);
  return m;
}

// Element i of layer l's flat buffer gets a value of its own.
float value_at(int layer, size_t i) { return static_cast<float>(layer * 10000 + static_cast<int>(i)) * 0.001f; }

// Every tensor of the model's HF layout, with those values, as RawTensors (F32 or BF16).
std::vector<RawTensor> model_tensors(const ModelConfig& m, const std::string& dtype = "F32") {
  std::vector<RawTensor> out;
  for (const TensorSlot& s : tensor_map(m, family_for(m, "test"))) {
    std::string bytes;
    for (size_t i = 0; i < s.numel; i++) {
      const float v = value_at(s.layer, s.layer_begin + i);
      if (dtype == "F32") {
        bytes.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t h = to_bf16(v).bits;
        bytes.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    out.push_back({s.name, dtype, s.shape, bytes});
  }
  return out;
}

void expect_refused(const std::string& dir, const ModelConfig& m, const std::vector<std::string>& parts) {
  try {
    HfWeights w(dir, m);
    FAIL() << "accepted " << dir;
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(HfWeights, EveryLayerIsReadWholeAndByAnyRange) {
  for (bool tied : {true, false}) {
    TempDir dir("hfw");
    const ModelConfig m = olmo2_model(tied);
    testing::write_tensors(dir.file("model.safetensors"), model_tensors(m));
    const HfWeights w(dir.path().string(), m);
    EXPECT_NE(w.describe().find("F32"), std::string::npos);
    const std::vector<ParamTable> tables = model_param_tables(m);
    for (int l = 0; l < static_cast<int>(tables.size()); l++) {
      const size_t n = tables[l].numel;
      std::vector<float> whole(n, -1);
      if (n) w.fill(l, 0, n, whole.data());
      for (size_t i = 0; i < n; i++) ASSERT_EQ(whole[i], value_at(l, i)) << l << " " << i;
      // Three ranks' contiguous ranges, cutting across tensors and rows.
      for (size_t begin : {size_t(0), n / 3, 2 * n / 3}) {
        const size_t end = begin == 2 * n / 3 ? n : begin + n / 3;
        std::vector<float> part(end - begin, -1);
        if (end > begin) w.fill(l, begin, end - begin, part.data());
        for (size_t i = begin; i < end; i++) ASSERT_EQ(part[i - begin], value_at(l, i));
      }
    }
  }
}

TEST(HfWeights, ShardsOfAnIndexAreReadAsOneFolder) {
  TempDir dir("hfw");
  const ModelConfig m = olmo2_model(false);
  std::vector<RawTensor> all = model_tensors(m, "BF16");
  std::vector<RawTensor> first(all.begin(), all.begin() + all.size() / 2), second(all.begin() + all.size() / 2, all.end());
  testing::write_tensors(dir.file("model-00001-of-00002.safetensors"), first);
  testing::write_tensors(dir.file("model-00002-of-00002.safetensors"), second);
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const RawTensor& t : first) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const RawTensor& t : second) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  testing::write_json(dir.file("model.safetensors.index.json"), index);
  const HfWeights w(dir.path().string(), m);
  EXPECT_EQ(w.files(), 2u);
  const std::vector<ParamTable> tables = model_param_tables(m);
  for (int l = 0; l < static_cast<int>(tables.size()); l++) {
    std::vector<float> got(tables[l].numel);
    w.fill(l, 0, got.size(), got.data());
    for (size_t i = 0; i < got.size(); i++) ASSERT_EQ(got[i], to_float(to_bf16(value_at(l, i))));
  }
  // The index places a tensor in a shard that does not hold it; names a missing shard.
  index["weight_map"][first[0].name] = "model-00002-of-00002.safetensors";
  testing::write_json(dir.file("model.safetensors.index.json"), index);
  expect_refused(dir.path().string(), m, {"places tensor " + first[0].name, "does not hold it"});
  index["weight_map"][first[0].name] = "model-00009-of-00002.safetensors";
  testing::write_json(dir.file("model.safetensors.index.json"), index);
  expect_refused(dir.path().string(), m, {"names shard model-00009-of-00002.safetensors", "not in"});
  index["weight_map"][first[0].name] = "../model.safetensors";
  testing::write_json(dir.file("model.safetensors.index.json"), index);
  expect_refused(dir.path().string(), m, {"is not a file name in the folder"});
}

TEST(HfWeights, MismatchesAreRefusedNamingFileAndTensor) {
  TempDir dir("hfw");
  const ModelConfig m = olmo2_model(false);
  const std::string folder = dir.path().string(), file = dir.file("model.safetensors");
  std::vector<RawTensor> t = model_tensors(m);

  auto without = [&](const std::string& name) {
    std::vector<RawTensor> out;
    for (const RawTensor& x : t)
      if (x.name != name) out.push_back(x);
    return out;
  };
  testing::write_tensors(file, without("model.layers.1.mlp.down_proj.weight"));
  expect_refused(folder, m, {"tensor model.layers.1.mlp.down_proj.weight", "[16, 24]", "missing from", file});

  std::vector<RawTensor> extra = t;
  extra.push_back({"model.layers.2.mlp.down_proj.weight", "F32", {1}, testing::f32_bytes({0})});
  testing::write_tensors(file, extra);
  expect_refused(folder, m, {file, "tensor model.layers.2.mlp.down_proj.weight", "is not one of Olmo2ForCausalLM"});

  std::vector<RawTensor> reshaped = without("model.norm.weight");
  reshaped.push_back({"model.norm.weight", "F32", {2, 8}, testing::f32_bytes(std::vector<float>(16, 1))});
  testing::write_tensors(file, reshaped);
  expect_refused(folder, m, {file, "tensor model.norm.weight has shape [2, 8]", "[16]"});

  std::vector<RawTensor> ints = without("model.norm.weight");
  ints.push_back({"model.norm.weight", "I32", {16}, std::string(64, '\0')});
  testing::write_tensors(file, ints);
  expect_refused(folder, m, {file, "tensor model.norm.weight has dtype I32", "F32, BF16 or F16"});

  std::filesystem::remove(file);
  std::ofstream(dir.file("pytorch_model.bin")) << "x";
  expect_refused(folder, m, {"no model.safetensors", "pytorch_model.bin"});
}

TEST(HfWeights, RopeBuffersAndATiedHeadAreToleratedAsTransformersDoes) {
  TempDir dir("hfw");
  const ModelConfig m = olmo2_model(true);
  std::vector<RawTensor> t = model_tensors(m);
  t.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {4}, testing::f32_bytes({1, 2, 3, 4})});
  t.push_back({"lm_head.weight", "F32", {32, 16}, testing::f32_bytes(std::vector<float>(512, 9))});
  testing::write_tensors(dir.file("model.safetensors"), t);
  const HfWeights w(dir.path().string(), m);
  std::vector<float> wte(32 * 16);
  w.fill(0, 0, wte.size(), wte.data());
  EXPECT_EQ(wte[5], value_at(0, 5));   // the embedding, not the ignored head
}

}  // namespace
}  // namespace asteria::hf
