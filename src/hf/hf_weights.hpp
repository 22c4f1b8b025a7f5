#pragma once
// The weights of a Hugging Face OlmoForCausalLM / Olmo2ForCausalLM folder as a ParamSource: the
// parameters a run starts from (model.init_from), a generator loads, or a test compares.
//
// The folder holds model.safetensors, or model.safetensors.index.json naming the shard file of
// every tensor ("weight_map"). Opening checks everything before any value is read: every file's
// header (safetensors.hpp), every tensor the model has (hf_tensor_map.hpp) present once with its
// shape and a weight dtype (F32, BF16, F16; mixed dtypes are fine), the index's files and the
// tensors it places in them, and no tensor the model does not have. Tolerated as transformers
// tolerates them: RoPE's `*.rotary_emb.inv_freq` buffers (recomputed), and `lm_head.weight` in a
// tied model (transformers ties it to the embedding, so it is not read). Each failure names the
// file and the tensor.
//
// fill() converts only the requested elements to float, straight from the memory map into the
// caller's buffer (no copy of the model), and gives the pages it read back to the page cache, so
// a rank of a sharded run reads its own rows and the process never holds the file and the
// parameters at once.
#include <memory>
#include <string>
#include <vector>

#include "hf/hf_tensor_map.hpp"
#include "hf/safetensors.hpp"
#include "model/param_source.hpp"

namespace asteria::hf {

class HfWeights : public ParamSource {
 public:
  // cfg: the model the folder must hold (its HF family from hf/hf_family.hpp).
  HfWeights(const std::string& folder, const ModelConfig& cfg);
  ~HfWeights() override;

  void fill(int layer, size_t begin, size_t count, float* dst) const override;
  std::string describe() const override;

  size_t files() const { return files_.size(); }
  size_t file_bytes() const;

 private:
  std::string folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorSlot> slots_;
  std::vector<const SafetensorsFile*> file_of_;      // per slot
  std::vector<std::vector<size_t>> slots_of_layer_;  // slot indices, by layer
  std::string dtypes_;                               // "BF16", "F32+BF16", ...
};

}  // namespace asteria::hf
