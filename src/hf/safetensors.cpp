#include "hf/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/bf16.hpp"
#include "core/error.hpp"

namespace asteria::hf {

// Data is read and written as the host lays it out; every machine Asteria targets is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// The format's own limit on the header (safetensors refuses larger ones too).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

// Bytes per element of every dtype the format defines (0: not a safetensors dtype).
size_t any_dtype_bytes(const std::string& d) {
  static const std::map<std::string, size_t> bytes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  const auto it = bytes.find(d);
  return it == bytes.end() ? 0 : it->second;
}

}  // namespace

const char* dtype_name(WeightDtype d) {
  switch (d) {
    case WeightDtype::F32: return "F32";
    case WeightDtype::BF16: return "BF16";
    case WeightDtype::F16: return "F16";
  }
  return "?";
}

const char* torch_dtype(WeightDtype d) {
  switch (d) {
    case WeightDtype::F32: return "float32";
    case WeightDtype::BF16: return "bfloat16";
    case WeightDtype::F16: return "float16";
  }
  return "?";
}

size_t dtype_bytes(WeightDtype d) { return d == WeightDtype::F32 ? 4 : 2; }

WeightDtype weight_dtype(const std::string& dtype, const std::string& file, const std::string& tensor) {
  if (dtype == "F32") return WeightDtype::F32;
  if (dtype == "BF16") return WeightDtype::BF16;
  if (dtype == "F16") return WeightDtype::F16;
  fail(file, ": tensor ", tensor, " has dtype ", excerpt(dtype), "; model weights are read from F32, BF16 or F16");
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);   // inf, NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalize the mantissa.
    exp = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

size_t TensorToWrite::numel() const {
  size_t n = 1;
  for (auto s : shape) n *= static_cast<size_t>(s);
  return n;
}

size_t SafetensorsFile::Tensor::numel() const {
  size_t n = 1;
  for (auto s : shape) n *= static_cast<size_t>(s);
  return n;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, WeightDtype dtype) {
  ASTERIA_ASSERT(dtype != WeightDtype::F16, "exports write F32 or BF16");
  const size_t elem = dtype_bytes(dtype);
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::set<std::string> names;
  size_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    ASTERIA_ASSERT(names.insert(t.name).second, "duplicate tensor ", t.name);
    const size_t bytes = t.numel() * elem;
    header[t.name] = {{"dtype", dtype_name(dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot create ", path);
  out.write(reinterpret_cast<const char*>(&header_len), sizeof header_len);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<uint16_t> chunk;
  for (const TensorToWrite& t : tensors) {
    const size_t n = t.numel();
    if (dtype == WeightDtype::F32) {
      out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(n * 4));
      continue;
    }
    // Converted in chunks: a full bf16 copy of a large embedding is not needed at once.
    for (size_t i = 0; i < n; i += size_t(1) << 20) {
      const size_t m = std::min(n - i, size_t(1) << 20);
      chunk.resize(m);
      for (size_t j = 0; j < m; j++) chunk[j] = to_bf16(t.data[i + j]).bits;
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(m * 2));
    }
  }
  out.flush();
  if (!out) fail("cannot write ", path, " (disk full?)");
}

namespace {

// One tensor's header entry, checked against the data area of `data_size` bytes.
SafetensorsFile::Tensor header_entry(const std::string& path, const std::string& name, const nlohmann::json& t,
                                     size_t data_size) {
  auto bad = [&](const auto&... why) { fail(path, ": tensor ", excerpt(name), ": ", why...); };
  if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") || !t["shape"].is_array() ||
      !t.contains("data_offsets") || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2)
    bad("the header entry needs dtype (a string), shape (a list) and data_offsets ([begin, end])");
  SafetensorsFile::Tensor x;
  x.dtype = t["dtype"].get<std::string>();
  const size_t elem = any_dtype_bytes(x.dtype);
  if (elem == 0) bad("unknown dtype ", excerpt(x.dtype));
  for (const auto& d : t["shape"]) {
    if (!d.is_number_unsigned()) bad("the shape ", excerpt(t["shape"].dump()), " is not a list of sizes");
    x.shape.push_back(d.get<int64_t>());
  }
  for (const auto& o : t["data_offsets"])
    if (!o.is_number_unsigned()) bad("data_offsets ", excerpt(t["data_offsets"].dump()), " are not two offsets");
  x.begin = t["data_offsets"][0].get<size_t>();
  x.end = t["data_offsets"][1].get<size_t>();
  if (x.begin > x.end) bad("data_offsets [", x.begin, ", ", x.end, "] end before they begin");
  if (x.end - x.begin != x.numel() * elem)
    bad("data_offsets [", x.begin, ", ", x.end, "] hold ", x.end - x.begin, " bytes but shape ", t["shape"].dump(),
        " of ", x.dtype, " needs ", x.numel() * elem);
  if (x.end > data_size)
    bad("its data ends at byte ", x.end, " of the data area but the file holds ", data_size,
        " bytes of data (truncated?)");
  return x;
}

// The tensors tile the data area: sorted by start, each begins where the last ended.
void check_tiling(const std::string& path, const std::map<std::string, SafetensorsFile::Tensor>& tensors, size_t data_size) {
  std::vector<std::pair<size_t, const std::string*>> spans;
  for (const auto& [name, t] : tensors)
    if (t.end > t.begin) spans.emplace_back(t.begin, &name);
  std::sort(spans.begin(), spans.end());
  size_t at = 0;
  for (const auto& [begin, name] : spans) {
    if (begin != at)
      fail(path, ": tensor ", excerpt(*name), " starts at byte ", begin, " of the data area where the previous ends at ",
           at, begin < at ? " (overlapping tensors)" : " (a hole)");
    at = tensors.at(*name).end;
  }
  if (at != data_size)
    fail(path, ": the tensors end at byte ", at, " of the data area but the file holds ", data_size,
         " (trailing bytes)");
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(path, " is not a readable file");
  }
  size_ = static_cast<size_t>(st.st_size);
  try {
    if (size_ < 8) fail(path, ": ", size_, " bytes, too short for a safetensors file (truncated?)");
    uint64_t n = 0;
    if (::pread(fd_, &n, sizeof n, 0) != static_cast<ssize_t>(sizeof n)) fail("cannot read ", path);
    if (n > kMaxHeaderBytes || n > size_ - 8)
      fail(path, ": the header says it is ", n, " bytes but the file has ", size_,
           " (truncated, or not a safetensors file)");
    std::string text(n, '\0');
    if (::pread(fd_, text.data(), n, 8) != static_cast<ssize_t>(n)) fail("cannot read ", path);
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail(path, ": the header is not valid JSON (", e.what(), ")");
    }
    if (!header.is_object()) fail(path, ": the header is not a JSON object");
    data_start_ = 8 + n;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const std::string& name = it.key();
      tensors_.emplace(name, header_entry(path, name, it.value(), size_ - data_start_));
    }
    check_tiling(path, tensors_, size_ - data_start_);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
      if (p == MAP_FAILED) fail("cannot map ", path, ": ", std::strerror(errno));
      map_ = static_cast<const unsigned char*>(p);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), size_);
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// [p, p + bytes) widened to whole pages.
std::pair<unsigned char*, size_t> pages_around(const unsigned char* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
  return {reinterpret_cast<unsigned char*>(begin), end - begin};
}

// Elements [first, first + count) of one dtype's values at src into dst.
void convert(WeightDtype d, const unsigned char* src, size_t first, size_t count, float* dst) {
  src += first * dtype_bytes(d);
  dst += first;
  if (d == WeightDtype::F32) {
    std::memcpy(dst, src, count * 4);
    return;
  }
  // Through memcpy: a header of odd length leaves the data unaligned.
  auto half = [src](size_t i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    return h;
  };
  if (d == WeightDtype::BF16)
    for (size_t i = 0; i < count; i++) dst[i] = to_float(bf16{half(i)});
  else
    for (size_t i = 0; i < count; i++) dst[i] = f16_to_float(half(i));
}

}  // namespace

void SafetensorsFile::read(const std::string& name, size_t first, size_t count, float* dst) const {
  const Tensor& t = tensors_.at(name);
  ASTERIA_ASSERT(first + count <= t.numel(), "read past tensor ", name);
  const WeightDtype d = weight_dtype(t.dtype, path_, name);
  const unsigned char* src = map_ + data_start_ + t.begin + first * dtype_bytes(d);
  // The whole range asked for at once: the kernel reads ahead in large requests instead of a
  // page fault at a time (a cold file then reads at the disk's rate).
  const auto [pages, bytes] = pages_around(src, count * dtype_bytes(d));
  ::madvise(pages, bytes, MADV_WILLNEED);
  // Threads split the range (the faults, the conversion and the destination's first touch).
  constexpr size_t kChunk = size_t(1) << 18;
  const int64_t chunks = static_cast<int64_t>((count + kChunk - 1) / kChunk);
#pragma omp parallel for schedule(dynamic, 1) if (chunks > 1)
  for (int64_t c = 0; c < chunks; c++) {
    const size_t a = static_cast<size_t>(c) * kChunk;
    convert(d, src, a, std::min(kChunk, count - a), dst);
  }
}

void SafetensorsFile::release(const std::string& name) const {
  const Tensor& t = tensors_.at(name);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // Whole pages inside the tensor only: a neighbour's pages may still be wanted.
  const size_t begin = (data_start_ + t.begin + page - 1) / page * page;
  const size_t end = (data_start_ + t.end) / page * page;
  if (end > begin) ::madvise(const_cast<unsigned char*>(map_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace asteria::hf
