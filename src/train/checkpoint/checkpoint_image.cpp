#include "train/checkpoint/checkpoint_image.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <tuple>
#include <set>

#include "core/error.hpp"
#include "core/hdf5_file.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"

namespace asteria {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "/optim/blocks/<tensor>/<row0>_<col0>/L" -> "/optim/blocks/<tensor>/<row0>_<col0>/block"
std::string block_dataset(const StatePiece& p) { return "/" + p.name.substr(0, p.name.rfind('/')) + "/block"; }

// The dataset a piece is written as: the global name, or for a shard's row-block of a tensor
// "<name>/rows_<first>_<end>".
std::string piece_dataset(const StatePiece& p) {
  if (p.tensor_rows == 0) return "/" + p.name;
  return "/" + p.name + "/rows_" + std::to_string(p.row0) + "_" + std::to_string(p.row0 + p.shape[0]);
}

// Where a piece's values are in a checkpoint's files. A checkpoint written at another world
// size may hold the piece's tensor whole (one file) or cut into other row-blocks (one file per
// rank); since shards are made of whole units, the rows a reader needs are always whole
// row-blocks of the writer's.
struct PieceSource {
  struct Part {
    size_t file = 0;
    std::string dataset;
    int64_t src_row0 = 0;   // first row to read from the dataset
    int64_t rows = 0;       // 0: the whole dataset
    int64_t out_row = 0;    // where they go in the piece
  };
  std::vector<Part> parts;
};

using Files = std::vector<std::unique_ptr<Hdf5File>>;

std::string files_text(const Files& files) {
  if (files.size() == 1) return files[0]->path();
  return files[0]->path() + " (and the other " + std::to_string(files.size() - 1) + " files of its checkpoint)";
}

PieceSource find_piece(const Files& files, const StatePiece& p) {
  const std::string whole = "/" + p.name;
  const bool slice = p.tensor_rows > 0;
  const std::vector<int64_t> global = slice ? std::vector<int64_t>{p.tensor_rows, p.shape[1]} : p.shape;
  const int64_t first = slice ? p.row0 : 0;
  const int64_t rows = p.shape.empty() ? 1 : p.shape[0];
  const int64_t row_numel = p.shape.size() == 2 ? p.shape[1] : 0;
  PieceSource src;
  for (size_t k = 0; k < files.size(); ++k) {
    if (!files[k]->is_dataset(whole)) continue;
    const std::vector<int64_t> shape = files[k]->shape(whole);
    if (shape != global)
      fail(files[k]->path(), ": tensor '", p.name, "' has shape ", shape_text(shape), ", this run needs ", shape_text(global));
    src.parts.push_back({k, whole, first, slice ? rows : 0, 0});
    return src;
  }
  // Row-blocks "rows_<a>_<b>", in any file: those inside [first, first + rows) must tile it.
  std::vector<std::tuple<int64_t, int64_t, size_t, std::string>> blocks;
  for (size_t k = 0; k < files.size() && p.shape.size() == 2; ++k)
    for (const std::string& m : files[k]->members(whole)) {
      long long a = 0, b = 0;
      if (std::sscanf(m.c_str(), "rows_%lld_%lld", &a, &b) == 2 && b > first && a < first + rows)
        blocks.emplace_back(a, b, k, whole + "/" + m);
    }
  if (blocks.empty()) fail(files_text(files), ": tensor '", p.name, "' is missing");
  std::sort(blocks.begin(), blocks.end());
  int64_t at = first;
  for (const auto& [a, b, k, ds] : blocks) {
    if (a != at || b > first + rows || files[k]->shape(ds) != std::vector<int64_t>{b - a, row_numel})
      fail(files[k]->path(), ": tensor '", p.name, "': its row-block ", ds.substr(whole.size() + 1),
           " does not fit the rows ", first, "-", first + rows - 1, " of shape ", shape_text(global), " that this run needs");
    src.parts.push_back({k, ds, 0, b - a, a - first});
    at = b;
  }
  if (at != first + rows)
    fail(files_text(files), ": tensor '", p.name, "' is missing rows ", at, "-", first + rows - 1, " (of shape ",
         shape_text(global), ")");
  return src;
}

void read_piece(const Files& files, const StatePiece& p, float* out) {
  const int64_t row_numel = p.shape.size() == 2 ? p.shape[1] : 0;
  for (const PieceSource::Part& part : find_piece(files, p).parts) {
    if (part.rows == 0)
      files[part.file]->read(part.dataset, out, p.count());
    else
      files[part.file]->read_rows(part.dataset, part.src_row0, part.rows, out + part.out_row * row_numel);
  }
}

Files open_files(const std::vector<std::string>& paths) {
  Files files;
  for (const std::string& path : paths) files.push_back(std::make_unique<Hdf5File>(path, Hdf5File::Mode::Read));
  return files;
}

// Writeback is started every this many bytes written, so the disk writes while write_image goes
// on filling the page cache, instead of starting at the caller's fsync (or when the kernel's
// dirty-page threshold is reached).
constexpr size_t kWritebackBytes = size_t{64} << 20;

}  // namespace

size_t CheckpointImage::bytes() const {
  size_t n = 0;
  for (const ImageBuffer& b : buffers) n += b.data.size() * sizeof(float);
  for (const auto& [name, v] : values) n += v.size() * sizeof(double);
  return n;
}

void write_image(const std::string& path, const CheckpointImage& image, const ImageSource& source) {
  {
    Hdf5File f(path, Hdf5File::Mode::Create);
    std::set<std::string> blocks;
    size_t unsynced = 0;
    for (size_t i = 0; i < image.buffers.size(); ++i) {
      const ImageBuffer& b = image.buffers[i];
      const float* data = source ? source(i) : b.data.data();
      for (const StatePiece& p : b.pieces) {
        ASTERIA_ASSERT(source || p.offset + p.count() <= b.data.size(), "piece ", p.name, " lies outside its buffer");
        f.write(piece_dataset(p), p.shape, data + p.offset);
        if (!p.block.empty() && blocks.insert(block_dataset(p)).second) {
          const std::vector<double> coords(p.block.begin(), p.block.end());
          f.write(block_dataset(p), {static_cast<int64_t>(coords.size())}, coords.data());
        }
        unsynced += p.count() * sizeof(float);
        if (unsynced >= kWritebackBytes) {
          f.start_writeback();
          unsynced = 0;
        }
      }
    }
    for (const auto& [name, v] : image.values) {
      ASTERIA_ASSERT(name.find('/') == std::string::npos, "value name ", name, " contains '/'");
      f.write("/values/" + name, {static_cast<int64_t>(v.size())}, v.data());
    }
    f.flush();
  }   // closed: the file's bytes are final
  // Its checksum now, from the page cache, while the rest is written back (the commit's
  // file_xxh3 then does not read the file again).
  remember_file_xxh3(path);
}

void check_image(const std::vector<std::string>& paths, CheckpointImage& image) {
  const Files files = open_files(paths);
  for (ImageBuffer& b : image.buffers)
    for (const StatePiece& p : b.pieces) {
      const PieceSource src = find_piece(files, p);
      if (!p.block.empty()) {
        const Hdf5File& f = *files[src.parts.front().file];
        std::vector<double> coords(4);
        if (!f.exists(block_dataset(p))) fail(f.path(), ": the block coordinates of '", p.name, "' are missing");
        f.read(block_dataset(p), coords.data(), coords.size());
        const std::vector<int64_t> got(coords.begin(), coords.end());
        if (got != p.block)
          fail(f.path(), ": tensor '", p.name, "' belongs to the block at rows/cols ", shape_text(got),
               ", this run's block is ", shape_text(p.block));
      }
    }
  // Values: the first file's, and those only other files hold (their ranks' block counters and
  // open refreshes).
  image.values.clear();
  for (const auto& f : files)
    for (const std::string& name : f->members("/values")) {
      if (image.values.count(name)) continue;
      const std::string ds = "/values/" + name;
      const std::vector<int64_t> shape = f->shape(ds);
      std::vector<double>& v = image.values[name];
      v.resize(shape.empty() ? 1 : static_cast<size_t>(shape[0]));
      f->read(ds, v.data(), v.size());
    }
}

void read_tensors(const std::vector<std::string>& paths, CheckpointImage& image, const ImageSink& sink) {
  const Files files = open_files(paths);
  std::vector<float> scratch;
  for (size_t i = 0; i < image.buffers.size(); ++i) {
    ImageBuffer& b = image.buffers[i];
    size_t size = 0;
    for (const StatePiece& p : b.pieces) size = std::max(size, p.offset + p.count());
    float* out = b.data.data();
    if (sink) {
      if (scratch.size() < size) scratch.resize(size);
      out = scratch.data();
    }
    ASTERIA_ASSERT(sink || b.data.size() >= size, "image buffer ", i, " is not sized for its pieces");
    for (const StatePiece& p : b.pieces) read_piece(files, p, out + p.offset);
    if (sink) sink(i, out);
  }
}

void check_image(const std::string& path, CheckpointImage& image) { check_image(std::vector<std::string>{path}, image); }
void read_tensors(const std::string& path, CheckpointImage& image, const ImageSink& sink) {
  read_tensors(std::vector<std::string>{path}, image, sink);
}

void read_image(const std::string& path, CheckpointImage& image) {
  check_image(path, image);
  read_tensors(path, image);
}

const std::vector<double>& image_value(const CheckpointImage& image, const std::string& name, size_t length,
                                       const std::string& file) {
  auto it = image.values.find(name);
  if (it == image.values.end()) fail(file, ": value '", name, "' is missing");
  if (length > 0 && it->second.size() != length)
    fail(file, ": value '", name, "' has ", it->second.size(), " entries, expected ", length);
  return it->second;
}

}  // namespace asteria
