#include "train/checkpoint_image.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"
#include "core/hdf5_file.hpp"
#include "train/checkpoint_manifest.hpp"

namespace asteria {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "/optim/blocks/<tensor>/<row0>_<col0>/L" -> "/optim/blocks/<tensor>/<row0>_<col0>/block"
std::string block_dataset(const StatePiece& p) { return "/" + p.name.substr(0, p.name.rfind('/')) + "/block"; }

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
        f.write("/" + p.name, p.shape, data + p.offset);
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

void check_image(const std::string& path, CheckpointImage& image) {
  Hdf5File f(path, Hdf5File::Mode::Read);
  for (ImageBuffer& b : image.buffers)
    for (const StatePiece& p : b.pieces) {
      const std::string ds = "/" + p.name;
      if (!f.exists(ds)) fail(path, ": tensor '", p.name, "' is missing");
      const std::vector<int64_t> shape = f.shape(ds);
      if (shape != p.shape)
        fail(path, ": tensor '", p.name, "' has shape ", shape_text(shape), ", this run needs ", shape_text(p.shape));
      if (!p.block.empty()) {
        std::vector<double> coords(4);
        if (!f.exists(block_dataset(p))) fail(path, ": the block coordinates of '", p.name, "' are missing");
        f.read(block_dataset(p), coords.data(), coords.size());
        const std::vector<int64_t> got(coords.begin(), coords.end());
        if (got != p.block)
          fail(path, ": tensor '", p.name, "' belongs to the block at rows/cols ", shape_text(got),
               ", this run's block is ", shape_text(p.block));
      }
    }
  image.values.clear();
  for (const std::string& name : f.members("/values")) {
    const std::string ds = "/values/" + name;
    const std::vector<int64_t> shape = f.shape(ds);
    std::vector<double>& v = image.values[name];
    v.resize(shape.empty() ? 1 : static_cast<size_t>(shape[0]));
    f.read(ds, v.data(), v.size());
  }
}

void read_tensors(const std::string& path, CheckpointImage& image, const ImageSink& sink) {
  Hdf5File f(path, Hdf5File::Mode::Read);
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
    for (const StatePiece& p : b.pieces) f.read("/" + p.name, out + p.offset, p.count());
    if (sink) sink(i, out);
  }
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
