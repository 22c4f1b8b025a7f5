#pragma once
// The export's only view of a checkpoint: the resolved config, the step and every model
// parameter under its ParamTable entry name, in float. Kept behind this one function so the
// trainer's own checkpoint reader can replace it without touching the rest of the export.
//
// Format read (checkpoint format_version 1, one rank):
//   DIR/manifest.json   {"format_version": 1, "step": S, "world_size": 1,
//                        "config": "<fully resolved config as YAML>",
//                        "files": [{"name": "rank00000.h5", "bytes": N, "xxh3": "<16 hex>"}]}
//   DIR/rank00000.h5    /params/<entry name> with the entry's global shape (any float type;
//                        read as float64 and narrowed to float, which is exact for fp32 data)
// Every listed file must exist with its size and XXH3-64 checksum; every parameter of
// model_param_tables(config.model) must be present with its shape. Anything else fails with an
// asteria::Error naming the file (and the tensor), before the caller writes anything.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "train/config.hpp"

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
