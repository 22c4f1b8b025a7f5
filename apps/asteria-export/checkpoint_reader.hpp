#pragma once
// The export's only view of a checkpoint: the resolved config, the step and every model
// parameter under its ParamTable entry name, in float, read with the trainer's checkpoint
// modules (train/checkpoint/checkpoint_manifest.hpp, train/checkpoint/checkpoint_image.hpp): the manifest must parse
// (known format version, config hash), every listed file must have its size and XXH3-64
// checksum, and /params/<entry name> must hold every parameter of model_param_tables(config.model)
// with its global shape. Anything else fails with an asteria::Error naming the file (and the
// tensor), before the caller writes anything.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace asteria::export_cli {

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

}  // namespace asteria::export_cli
