#pragma once
// A checkpoint's model as the export and the generator see it: the resolved config, the step and
// every model parameter under its ParamTable entry name, in float, read with the trainer's
// checkpoint modules (checkpoint_manifest.hpp, checkpoint_image.hpp): the manifest must parse
// (known format version, config hash), every listed file must have its size and XXH3-64
// checksum, and /params/<entry name> must hold every parameter of model_param_tables(config.model)
// with its global shape. Anything else fails with an asteria::Error naming the file (and the
// tensor), before the caller writes anything.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "model/param_source.hpp"
#include "model/param_table.hpp"

namespace asteria {

struct CheckpointTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;   // row-major
};

struct CheckpointParams {
  std::string dir;
  Config config;
  int64_t step = 0;
  std::map<std::string, CheckpointTensor> params;   // by entry name ("wte", "blocks.0.att_qkv")
};

CheckpointParams read_checkpoint_params(const std::string& dir);

// The parameters as a ParamSource (a generator's start), valid while `params` lives.
class CheckpointParamSource : public ParamSource {
 public:
  explicit CheckpointParamSource(const CheckpointParams& params);
  void fill(int layer, size_t begin, size_t count, float* dst) const override;
  std::string describe() const override;

 private:
  const CheckpointParams& params_;
  std::vector<ParamTable> tables_;
};

}  // namespace asteria
