#pragma once
// model.safetensors: an 8-byte little-endian header length, a JSON header
//   {"__metadata__": {"format": "pt"},
//    "<name>": {"dtype": "F32"|"BF16", "shape": [...], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8 bytes (so the data starts aligned), then the tensors'
// raw little-endian bytes back to back in the order given (offsets relative to the data start).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "hf_layout.hpp"

namespace asteria::export_cli {

enum class ExportDtype { F32, BF16 };

// "fp32" / "bf16"; anything else is an asteria::Error naming the value.
ExportDtype parse_export_dtype(const std::string& text);
const char* safetensors_dtype(ExportDtype d);   // "F32" / "BF16"
const char* torch_dtype_name(ExportDtype d);    // "float32" / "bfloat16" (config.json)

// bfloat16 bits of x, rounded to nearest, ties to even (as torch's .to(torch.bfloat16));
// NaN stays a (quiet) NaN, overflow rounds to infinity.
inline uint16_t bf16_from_float(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Writes the tensors to path (replacing it); asteria::Error naming path on any I/O failure.
void write_safetensors(const std::string& path, const std::vector<HfTensor>& tensors,
                       ExportDtype dtype);

}  // namespace asteria::export_cli
