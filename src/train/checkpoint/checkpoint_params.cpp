#include "train/checkpoint/checkpoint_params.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "model/model.hpp"
#include "train/checkpoint/checkpoint_image.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "train/checkpoint/checkpoint_store.hpp"

namespace asteria {

CheckpointParams read_checkpoint_params(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string manifest = (fs::path(dir) / "manifest.json").string();
  const Manifest m = read_manifest(manifest);   // format version, fields, config hash
  verify_files(dir, m);   // sizes and checksums
  CheckpointParams ck;
  ck.dir = dir;
  ck.step = m.step;
  ck.config = load_saved_config(m.config, manifest);
  // The model's parameters only: one image buffer per tensor, read and shape-checked.
  CheckpointImage image;
  for (const ParamTable& table : model_param_tables(ck.config.model))
    for (const ParamEntry& e : table.entries) {
      ImageBuffer b;
      b.pieces.push_back({state_piece_name("params", e.name), e.shape, 0, {}});
      b.data.resize(e.numel);
      image.buffers.push_back(std::move(b));
    }
  // Whole tensors, or a sharded run's row-blocks across its rank files.
  const std::vector<std::string> files = checkpoint_rank_files(dir, m);
  check_image(files, image);
  read_tensors(files, image);
  for (ImageBuffer& b : image.buffers)
    ck.params[b.pieces[0].name.substr(7)] = {b.pieces[0].shape, std::move(b.data)};
  return ck;
}

CheckpointParamSource::CheckpointParamSource(const CheckpointParams& params)
    : params_(params), tables_(model_param_tables(params.config.model)) {}

void CheckpointParamSource::fill(int layer, size_t begin, size_t count, float* dst) const {
  const size_t end = begin + count;
  for (const ParamEntry& e : tables_.at(static_cast<size_t>(layer)).entries) {
    const size_t a = std::max(begin, e.offset), b = std::min(end, e.offset + e.numel);
    if (a >= b) continue;
    const float* src = params_.params.at(e.name).data.data();
    std::copy(src + (a - e.offset), src + (b - e.offset), dst + (a - begin));
  }
}

std::string CheckpointParamSource::describe() const {
  return detail::concat("checkpoint ", params_.dir, " (step ", params_.step, ")");
}

}  // namespace asteria
