#pragma once
// The contents of one rank's checkpoint file (docs/DESIGN.md "Checkpoints"), in memory and in HDF5.
//
// A CheckpointImage is a copy of a run's state at a step boundary: float32 buffers (the
// parameters of each layer, each optimizer state tensor), each stored as the global tensors it
// holds (StatePiece: a global name, the global shape, and for preconditioner-block state the
// block's coordinates in the unsharded parameter), and small float64 arrays for everything that
// is not a tensor (the Stateful components' fields, core/stateful.hpp). Nothing is keyed by
// rank or memory layout, so a loader can regroup the pieces for another layout.
//
// HDF5 layout of rank<R>.h5:
//   /<piece name>                float32, the piece's global shape ("/params/blocks.0.att_qkv",
//                                "/optim/adamw/blocks.0.norm_att/m", "/optim/blocks/<tensor>/
//                                <row0>_<col0>/L", ...)
//   /<piece name>/rows_<a>_<b>   float32 [b - a, cols]: rows a..b-1 of the tensor (a sharded
//                                rank's row-block of it; the other rows are in other ranks' files)
//   /<block group>/block         float64 [row0, rows, col0, cols] of a preconditioner block
//   /values/<name>               float64 arrays ("train.step", "optim.counters.<block>", ...)
// The image is allocated once and reused by later checkpoints of the same run (same buffers).
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/stateful.hpp"
#include "optim/optimizer.hpp"

namespace asteria {

struct ImageBuffer {
  std::vector<StatePiece> pieces;   // names without the leading '/'
  std::vector<float> data;          // covers every piece
};

struct CheckpointImage {
  std::vector<ImageBuffer> buffers;
  StateFields values;   // names without '/' (core/stateful.hpp)
  size_t bytes() const;
};

// Where write_image reads buffer i's floats: by default its `data`; a writer that does not stage
// the state points at it where it lives (it must stay unchanged until write_image returns).
using ImageSource = std::function<const float*(size_t buffer)>;

// Writes the image to `path` (created or truncated) and flushes it; an Error naming the file on
// failure. The caller fsyncs (checkpoint_store.hpp). While writing it starts the writeback of what
// it wrote (so the disk works during the write, not only in the caller's fsync), and once the file
// is closed it checksums it from the page cache (remember_file_xxh3), so the commit's file_xxh3
// of the unchanged file does not read it back again.
void write_image(const std::string& path, const CheckpointImage& image, const ImageSource& source = nullptr);

// Reading, in two passes so that a reader can refuse a checkpoint before it changes anything:
// check_image checks that every piece of the laid-out image (the reader's own model and
// optimizer say what they need) exists with the expected shape and block coordinates, and reads
// all /values into image.values; read_tensors then reads each buffer and hands it to `sink`
// (default: into buffers[i].data, which must be sized). Errors name the file, the tensor and
// what is wrong (missing, shape).
using ImageSink = std::function<void(size_t buffer, const float* data)>;
void check_image(const std::string& path, CheckpointImage& image);
void read_tensors(const std::string& path, CheckpointImage& image, const ImageSink& sink = nullptr);
// The same over all files of a checkpoint written by several ranks (rank00000.h5 first): a
// piece is found whole in one file or as row-blocks across them ("<name>/rows_<a>_<b>", a
// rank's shard of a tensor), and the values are the first file's plus those only other files
// hold (their blocks' counters, their open refreshes).
void check_image(const std::vector<std::string>& paths, CheckpointImage& image);
void read_tensors(const std::vector<std::string>& paths, CheckpointImage& image, const ImageSink& sink = nullptr);
// Both, into the buffers' data.
void read_image(const std::string& path, CheckpointImage& image);

// A value the reader needs: an Error naming the file when it is missing or of another length
// (length 0: any).
const std::vector<double>& image_value(const CheckpointImage& image, const std::string& name, size_t length,
                                       const std::string& file);

}  // namespace asteria
