#pragma once
// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"format": "pt"},
//    "<name>": {"dtype": "F32"|"BF16"|"F16"|..., "shape": [...], "data_offsets": [begin, end]}, ...}
// (padded with spaces), then the tensors' raw little-endian bytes, offsets relative to the data
// start, which the tensors tile without holes or overlaps.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace asteria::hf {

// The dtypes a model's weights are read from; every other dtype is refused by name.
enum class WeightDtype { F32, BF16, F16 };

const char* dtype_name(WeightDtype d);    // "F32" / "BF16" / "F16"
const char* torch_dtype(WeightDtype d);   // "float32" / "bfloat16" / "float16" (config.json)
size_t dtype_bytes(WeightDtype d);

float f16_to_float(uint16_t h);           // IEEE half, subnormals and inf / NaN included

// One tensor to write: numel() floats at data, stored as `dtype` (BF16: rounded to nearest even).
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
  size_t numel() const;
};

// Writes the tensors (in this order) to path, replacing it; asteria::Error naming path on an I/O
// failure. F32 and BF16 only (what an export writes).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, WeightDtype dtype);

// A safetensors file read through a read-only memory map: the header is parsed and checked when
// it opens (valid JSON; each tensor's dtype and shape; offsets inside the data area, matching
// the shape's bytes, tiling it without overlap or hole; a file no shorter than the header says),
// so a truncated file or a header that lies is refused, naming the file and the tensor, before
// any value is read. Values are converted to float only where read(); what a read touched can
// be dropped from the process's memory again (release), so a whole model is never resident twice.
class SafetensorsFile {
 public:
  struct Tensor {
    std::string dtype;              // as the header says ("BF16", "I64", ...)
    std::vector<int64_t> shape;
    size_t begin = 0, end = 0;      // byte offsets in the data area
    size_t numel() const;
  };

  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

  // Elements [first, first + count) of tensor `name` (dtype F32, BF16 or F16) as floats.
  void read(const std::string& name, size_t first, size_t count, float* dst) const;
  // Gives back the pages of tensor `name` to the page cache (the file stays mapped).
  void release(const std::string& name) const;

 private:
  std::string path_;
  int fd_ = -1;
  const unsigned char* map_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;
  std::map<std::string, Tensor> tensors_;
};

// The weight dtype of a header dtype string, or throws naming file, tensor and dtype.
WeightDtype weight_dtype(const std::string& dtype, const std::string& file, const std::string& tensor);

}  // namespace asteria::hf
