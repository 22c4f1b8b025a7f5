#pragma once
// Helpers for the asteria-export tests: a seeded tiny model with its norm weights moved away
// from 1, a checkpoint folder written in the format the trainer writes (manifest.json +
// rank00000.h5 with /params), Asteria's own logits, and the programs' command lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/hdf5_file.hpp"
#include "train/checkpoint/checkpoint_image.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "model/model.hpp"
#include "test_util.hpp"
#include "config/config.hpp"

namespace asteria::testing {

// tiny with a padded embedding (vocab 500 in 512 rows), 4 heads, and weights large enough
// (std 0.15) that attention is far from uniform, so RoPE and head layout matter in the logits.
inline Config export_config(std::vector<std::string> sets) {
  std::vector<std::string> base = {"model.vocab_size=500", "model.embedding_size=512",
                                   "model.n_heads=4", "model.init_std=0.15"};
  base.insert(base.end(), sets.begin(), sets.end());
  return load_config_text("seed: 5\nmodel:\n  preset: tiny\n", "export_test.yaml", base);
}

// Initializes from the seed, then norm weights to 1 + U(-0.5, 0.5) so a dropped or misplaced
// norm weight changes the logits.
template <class T>
void init_model(Model<T>& m, uint64_t seed) {
  m.init(seed);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (int l = 0; l < m.num_layers(); l++)
    for (const ParamEntry& e : m.table(l).entries)
      if (e.cls == ParamClass::Norm)
        for (size_t i = 0; i < e.numel; i++) m.params(l)[e.offset + i] = static_cast<T>(1 + u(rng));
}

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes a checkpoint of the model's parameters (all but `skip`) at `dir` with the trainer's
// own checkpoint modules (image, manifest, commit protocol), plus unrelated values that the
// export must ignore.
inline void write_checkpoint(const std::string& dir, const Config& cfg, Model<float>& m,
                             int64_t step, const std::set<std::string>& skip = {}) {
  CheckpointImage image;
  for (int l = 0; l < m.num_layers(); l++)
    for (const ParamEntry& e : m.table(l).entries) {
      if (skip.count(e.name)) continue;
      ImageBuffer b;
      b.pieces.push_back({state_piece_name("params", e.name), e.shape, 0, {}});
      b.data.assign(m.params(l) + e.offset, m.params(l) + e.offset + e.numel);
      image.buffers.push_back(std::move(b));
    }
  image.values["train.step"] = {static_cast<double>(step)};
  Manifest man;
  man.step = step;
  man.config = config_to_yaml(cfg);
  man.config_hash = text_xxh3(man.config);
  const std::filesystem::path p(dir);
  const std::string written = commit_checkpoint(p.parent_path().string(), man, [&](const std::string& tmp) {
    write_image(tmp + "/rank00000.h5", image);
    return std::vector<std::string>{"rank00000.h5"};
  });
  std::filesystem::rename(written, dir);
}

// B sequences of seq_len + 1 ids below vocab_size, one per line (the reference's input: positions
// 0 .. seq_len-1 are scored against ids 1 .. seq_len, as Asteria's inputs and targets).
inline std::vector<int32_t> random_tokens(const ModelConfig& mc, int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(batch) * (mc.seq_len + 1));
  for (auto& t : ids) t = static_cast<int32_t>(rng() % mc.vocab_size);
  return ids;
}

inline void write_tokens(const std::string& path, const std::vector<int32_t>& ids, int seq_len) {
  std::ofstream out(path);
  for (size_t i = 0; i < ids.size(); i++) out << ids[i] << ((i + 1) % (seq_len + 1) == 0 ? "\n" : " ");
}

// Asteria's inputs and targets of those sequences: each one's first seq_len ids, and its last.
struct ModelBatch {
  std::vector<int32_t> inputs, targets;
};
inline ModelBatch model_batch(const std::vector<int32_t>& ids, int seq_len) {
  ModelBatch b;
  for (size_t s = 0; s < ids.size() / (seq_len + 1); s++)
    for (int t = 0; t < seq_len; t++) {
      b.inputs.push_back(ids[s * (seq_len + 1) + t]);
      b.targets.push_back(ids[s * (seq_len + 1) + t + 1]);
    }
  return b;
}

// Asteria's cross-entropy on the batch (the loss without a z-loss term, which HF's has not) and
// its logits [B*T, E] in double: the head's final hidden state times every row of the LM head,
// as the head computes them.
template <class T>
std::vector<double> asteria_logits(Model<T>& m, const ModelBatch& batch, double* ce_loss) {
  const ModelConfig& mc = m.config();
  m.set_batch(batch.inputs.data(), batch.targets.data());
  for (int l = 0; l < m.num_layers(); l++) m.forward(l);
  *ce_loss = m.last_ce_loss();
  const T* xf = m.last_final_hidden();
  const T* w = m.params(0);   // wte
  if (!mc.tied_embeddings) {
    const ParamTable& head = m.table(m.num_layers() - 1);
    w = m.params(m.num_layers() - 1) + head.find("lm_head")->offset;
  }
  const size_t N = batch.inputs.size(), C = mc.d_model, E = mc.embedding_size;
  std::vector<double> logits(N * E);
  for (size_t n = 0; n < N; n++)
    for (size_t v = 0; v < E; v++) {
      double s = 0;
      for (size_t c = 0; c < C; c++) s += double(xf[n * C + c]) * double(w[v * C + c]);
      logits[n * E + v] = s;
    }
  return logits;
}

inline std::string export_command(const std::string& args) {
  return std::string(ASTERIA_BIN_DIR) + "/asteria-export " + args;
}

// tests/integration/hf_torch_reference.py: writes OUT.f32, OUT.f64 (logits) and OUT.json (losses).
inline std::string hf_reference_command(const std::string& model_dir, const std::string& tokens,
                                        const std::string& out) {
  return "/usr/bin/python3 " + std::string(ASTERIA_SOURCE_DIR) + "/tests/integration/hf_torch_reference.py " +
         model_dir + " " + tokens + " " + out;
}

inline std::vector<double> read_f64(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  std::vector<double> v(bytes.size() / sizeof(double));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(double));
  return v;
}

// max |a - b| over every value, and max |b|.
struct LogitDifference {
  double max_abs = 0, scale = 0;
  double relative() const { return max_abs / scale; }
};
inline LogitDifference logit_difference(const std::vector<double>& a, const std::vector<double>& b) {
  LogitDifference d;
  for (size_t i = 0; i < a.size(); i++) {
    d.max_abs = std::max(d.max_abs, std::abs(a[i] - b[i]));
    d.scale = std::max(d.scale, std::abs(b[i]));
  }
  return d;
}

inline nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(read_file_bytes(path));
}

// A safetensors file split into its JSON header and its data area (parsed here, not by the
// exporter's code, so the test does not share its assumptions).
struct SafetensorsFile {
  nlohmann::json header;
  std::string data;
};

inline SafetensorsFile read_safetensors(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | static_cast<unsigned char>(bytes.at(i));
  return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

// Element i of tensor `name` (F32 or BF16) as a double.
inline double safetensors_value(const SafetensorsFile& f, const std::string& name, size_t i) {
  const auto& t = f.header.at(name);
  const size_t begin = t.at("data_offsets").at(0).get<size_t>();
  uint32_t bits = 0;
  if (t.at("dtype") == "F32") {
    std::memcpy(&bits, f.data.data() + begin + 4 * i, 4);
  } else {
    uint16_t half;
    std::memcpy(&half, f.data.data() + begin + 2 * i, 2);
    bits = uint32_t(half) << 16;
  }
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// A corpus with a bounded alphabet, so a 300-piece tokenizer trains in a moment.
inline void write_corpus(const std::string& path) {
  const char* words[] = {"the", "whale", "ship", "sea", "captain", "sailed", "over", "deep",
                         "waters", "and", "harpoon", "crew", "watched", "white", "storm"};
  std::ofstream out(path);
  uint32_t x = 12345;
  for (int d = 0; d < 9; ++d) {
    std::string text;
    for (int w = 0; w < 120; ++w) {
      x = x * 1103515245u + 12345u;
      if (w) text += ' ';
      text += words[(x >> 16) % 15];
    }
    out << nlohmann::json{{"source", "test"}, {"title", std::to_string(d)}, {"text", text + "."}}.dump()
        << "\n";
  }
}

// dir/data/{tokenizer.model, train.bin, val.bin, data.json}, as scripts/prepare_data.sh lays out.
inline void prepare_data(const TempDir& dir) {
  write_corpus(dir.file("corpus.jsonl"));
  const std::string bin = std::string(ASTERIA_BIN_DIR) + "/asteria-data";
  std::string log;
  ASSERT_EQ(run_command(bin + " train-tokenizer --corpus " + dir.file("corpus.jsonl") +
                            " --vocab-size 300 --output " + dir.file("data/tokenizer"), &log), 0)
      << log;
  ASSERT_EQ(run_command(bin + " encode --corpus " + dir.file("corpus.jsonl") + " --tokenizer " +
                            dir.file("data/tokenizer.model") + " --output-dir " + dir.file("data") +
                            " --val-every 3", &log), 0)
      << log;
}

}  // namespace asteria::testing
