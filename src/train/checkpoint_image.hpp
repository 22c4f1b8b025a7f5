#pragma once
// The contents of one rank's checkpoint file (DESIGN.md "Checkpoints"), in memory and in HDF5.
//
// A CheckpointImage is a copy of a run's state at a step boundary: float32 buffers (the
// parameters of each layer, each optimizer state tensor), each stored as the global tensors it
// holds (StatePiece: a global name, the global shape, and for preconditioner-block state the
// block's coordinates in the unsharded parameter), and small float64 arrays for everything that
// is not a tensor (counters, the loader's position, open shadow refreshes). Nothing is keyed by
// rank or memory layout, so a loader can regroup the pieces for another layout.
//
// HDF5 layout of rank<R>.h5:
//   /<piece name>                float32, the piece's global shape ("/params/blocks.0.att_qkv",
//                                "/optim/adamw/blocks.0.norm_att/m", "/optim/blocks/<tensor>/
//                                <row0>_<col0>/L", ...)
//   /<block group>/block         float64 [row0, rows, col0, cols] of a preconditioner block
//   /values/<name>               float64 arrays ("train.step", "optim.counters.<block>", ...)
// The image is allocated once and reused by later checkpoints of the same run (same buffers).
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "optim/optimizer.hpp"

namespace asteria {

struct ImageBuffer {
  std::vector<StatePiece> pieces;   // names without the leading '/'
  std::vector<float> data;          // covers every piece
};

struct CheckpointImage {
  std::vector<ImageBuffer> buffers;
  std::map<std::string, std::vector<double>> values;   // names without '/'
  size_t bytes() const;
};

// Writes the image to `path` (created or truncated) and flushes it; an Error naming the file on
// failure. The caller fsyncs (checkpoint_store.hpp). While writing it starts the writeback of what
// it wrote (so the disk works during the write, not only in the caller's fsync), and once the file
// is closed it checksums it from the page cache (remember_file_xxh3), so the commit's file_xxh3
// of the unchanged file does not read it back again.
void write_image(const std::string& path, const CheckpointImage& image);

// Reads `path` into an image whose buffers and pieces are already laid out (the reader's own
// model and optimizer say what they need): every piece must exist with the expected shape, and
// block coordinates must match. All /values are read. Errors name the file, the tensor and what
// is wrong (missing, shape).
void read_image(const std::string& path, CheckpointImage& image);

// A value the reader needs: an Error naming the file when it is missing or of another length
// (length 0: any).
const std::vector<double>& image_value(const CheckpointImage& image, const std::string& name, size_t length,
                                       const std::string& file);

}  // namespace asteria
