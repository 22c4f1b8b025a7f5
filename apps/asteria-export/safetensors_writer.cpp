#include "safetensors_writer.hpp"

#include <algorithm>
#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"

namespace asteria::export_cli {

// The data is written as the host lays it out; every machine Asteria targets is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

ExportDtype parse_export_dtype(const std::string& text) {
  if (text == "fp32") return ExportDtype::F32;
  if (text == "bf16") return ExportDtype::BF16;
  fail("--dtype must be fp32 or bf16 (got '", excerpt(text), "')");
}

const char* safetensors_dtype(ExportDtype d) { return d == ExportDtype::F32 ? "F32" : "BF16"; }
const char* torch_dtype_name(ExportDtype d) {
  return d == ExportDtype::F32 ? "float32" : "bfloat16";
}

void write_safetensors(const std::string& path, const std::vector<HfTensor>& tensors,
                       ExportDtype dtype) {
  const size_t elem = dtype == ExportDtype::F32 ? 4 : 2;
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::set<std::string> names;
  size_t offset = 0;
  for (const HfTensor& t : tensors) {
    ASTERIA_ASSERT(names.insert(t.name).second, "duplicate tensor ", t.name);
    const size_t bytes = t.numel() * elem;
    header[t.name] = {{"dtype", safetensors_dtype(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
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
  for (const HfTensor& t : tensors) {
    const size_t n = t.numel();
    if (dtype == ExportDtype::F32) {
      out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(n * 4));
      continue;
    }
    // Converted in chunks: a full bf16 copy of a large embedding is not needed at once.
    for (size_t i = 0; i < n; i += size_t(1) << 20) {
      const size_t m = std::min(n - i, size_t(1) << 20);
      chunk.resize(m);
      for (size_t j = 0; j < m; j++) chunk[j] = bf16_from_float(t.data[i + j]);
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(m * 2));
    }
  }
  out.flush();
  if (!out) fail("cannot write ", path, " (disk full?)");
}

}  // namespace asteria::export_cli
