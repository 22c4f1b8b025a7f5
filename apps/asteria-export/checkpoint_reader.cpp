#include "checkpoint_reader.hpp"

#include <filesystem>

#include "core/error.hpp"
#include "model/model.hpp"
#include "train/checkpoint/checkpoint_image.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "train/checkpoint/checkpoint_store.hpp"

namespace asteria::export_cli {

CheckpointParams read_checkpoint_params(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string manifest = (fs::path(dir) / "manifest.json").string();
  const Manifest m = read_manifest(manifest);   // format version, fields, config hash
  verify_files(dir, m);   // sizes and checksums
  CheckpointParams ck;
  ck.dir = dir;
  ck.step = m.step;
  ck.config = load_config_text(m.config, manifest);
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

}  // namespace asteria::export_cli
