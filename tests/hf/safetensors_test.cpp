// hf/safetensors.hpp: the writer's files read back, every dtype's conversion, and every way a file
// can lie (truncated, offsets past the data, overlaps, holes, bad JSON, bad dtypes), each refused
// naming the file and the tensor before any value is read.
#include "hf/safetensors.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "hf_test_files.hpp"
#include "test_util.hpp"

namespace asteria::hf {
namespace {

using testing::RawTensor;
using testing::TempDir;

void expect_refused(const std::string& path, const std::vector<std::string>& parts) {
  try {
    SafetensorsFile f(path);
    FAIL() << "accepted " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(Safetensors, WrittenF32AndBf16ReadBackAsWrittenOrRounded) {
  TempDir dir("st");
  std::vector<float> a(35), b(6);
  for (size_t i = 0; i < a.size(); i++) a[i] = std::sin(0.37 * i) * 3.1f;
  for (size_t i = 0; i < b.size(); i++) b[i] = -1.0f / (i + 1);
  const std::vector<TensorToWrite> t = {{"a", {5, 7}, a.data()}, {"b.weight", {6}, b.data()}};
  for (WeightDtype d : {WeightDtype::F32, WeightDtype::BF16}) {
    const std::string path = dir.file(std::string(dtype_name(d)) + ".safetensors");
    write_safetensors(path, t, d);
    SafetensorsFile f(path);
    ASSERT_EQ(f.tensors().size(), 2u);
    EXPECT_EQ(f.tensors().at("a").shape, (std::vector<int64_t>{5, 7}));
    EXPECT_EQ(f.tensors().at("a").dtype, dtype_name(d));
    std::vector<float> got(35);
    f.read("a", 0, 35, got.data());
    for (size_t i = 0; i < a.size(); i++) {
      const float want = d == WeightDtype::F32 ? a[i] : to_float(to_bf16(a[i]));
      ASSERT_EQ(got[i], want) << i;
    }
    // A range inside a tensor.
    f.read("b.weight", 2, 3, got.data());
    for (int i = 0; i < 3; i++) EXPECT_EQ(got[i], d == WeightDtype::F32 ? b[2 + i] : to_float(to_bf16(b[2 + i])));
    f.release("a");   // pages given back: the values are still readable
    f.read("a", 34, 1, got.data());
    EXPECT_EQ(got[0], d == WeightDtype::F32 ? a[34] : to_float(to_bf16(a[34])));
  }
}

TEST(Safetensors, Float16ConvertsEveryValueExactly) {
  // Every one of the 65536 halves: normals, subnormals, zeros, infinities and NaNs, against the
  // value computed from the definition (sign, exponent bias 15, 10 mantissa bits).
  for (uint32_t h = 0; h < 65536; h++) {
    const int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    const float got = f16_to_float(static_cast<uint16_t>(h));
    if (exp == 31) {
      if (mant == 0) ASSERT_TRUE(std::isinf(got) && std::signbit(got) == bool(sign)) << h;
      else ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
    ASSERT_EQ(static_cast<double>(got), sign ? -mag : mag) << h;
    ASSERT_EQ(std::signbit(got), bool(sign)) << h;
  }
}

TEST(Safetensors, F16AndUnalignedDataAreRead) {
  TempDir dir("st");
  // 1.0, -2.0, 0.5 as halves; a header of 13 bytes (padded by hand to an odd length) so the data
  // starts unaligned.
  const std::string bytes("\x00\x3c\x00\xc0\x00\x38", 6);
  const std::string header = R"({"h":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})";
  const std::string path = dir.file("f16.safetensors");
  {
    const uint64_t n = header.size() + 1;   // one trailing space: 8 + n is odd
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << header << ' ' << bytes;
  }
  SafetensorsFile f(path);
  float v[3];
  f.read("h", 0, 3, v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 0.5f);
}

TEST(Safetensors, DamagedFilesAreRefusedNamingFileAndTensor) {
  TempDir dir("st");
  const std::string four = testing::f32_bytes({1, 2, 3, 4});
  auto path = [&](const std::string& n) { return dir.file(n); };

  // Truncated: the data area is shorter than the tensors say.
  testing::write_tensors(path("ok"), {{"w", "F32", {4}, four}});
  std::string whole;
  {
    std::ifstream in(path("ok"), std::ios::binary);
    whole.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(path("cut"), std::ios::binary) << whole.substr(0, whole.size() - 3);
  expect_refused(path("cut"), {path("cut"), "tensor w", "truncated"});
  std::ofstream(path("tiny"), std::ios::binary) << "abc";
  expect_refused(path("tiny"), {path("tiny"), "too short"});
  // A header length beyond the file.
  std::ofstream(path("len"), std::ios::binary) << whole.substr(8, 20).insert(0, std::string("\xff\xff\x00\x00\x00\x00\x00\x00", 8));
  expect_refused(path("len"), {path("len"), "header says"});
  // Offsets that lie: fewer bytes than the shape needs, past the end, overlapping, a hole.
  testing::write_raw_safetensors(path("short"), R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", four);
  expect_refused(path("short"), {"tensor w", "hold 12 bytes", "needs 16"});
  testing::write_raw_safetensors(path("past"), R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", four);
  expect_refused(path("past"), {"tensor w", "ends at byte 24"});
  testing::write_raw_safetensors(
      path("overlap"),
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      four);
  expect_refused(path("overlap"), {"tensor b", "overlapping"});
  testing::write_raw_safetensors(
      path("hole"),
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
      four);
  expect_refused(path("hole"), {"tensor b", "a hole"});
  testing::write_raw_safetensors(path("trail"), R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four);
  expect_refused(path("trail"), {"trailing bytes"});
  // Not JSON, not a mapping, entries without their fields, unknown dtypes, bad shapes.
  testing::write_raw_safetensors(path("json"), R"({"w":{"dtype":"F32",)", four);
  expect_refused(path("json"), {path("json"), "not valid JSON"});
  testing::write_raw_safetensors(path("list"), R"([1,2])", four);
  expect_refused(path("list"), {"not a JSON object"});
  testing::write_raw_safetensors(path("fields"), R"({"w":{"dtype":"F32","shape":[4]}})", four);
  expect_refused(path("fields"), {"tensor w", "data_offsets"});
  testing::write_raw_safetensors(path("dtype"), R"({"w":{"dtype":"F12","shape":[4],"data_offsets":[0,16]}})", four);
  expect_refused(path("dtype"), {"tensor w", "unknown dtype F12"});
  testing::write_raw_safetensors(path("shape"), R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", four);
  expect_refused(path("shape"), {"tensor w", "shape"});
  expect_refused(path("missing"), {"cannot open", path("missing")});
}

TEST(Safetensors, ANonWeightDtypeIsRefusedWhenRead) {
  TempDir dir("st");
  testing::write_tensors(dir.file("i64"), {{"steps", "I64", {2}, std::string(16, '\0')}});
  SafetensorsFile f(dir.file("i64"));   // a valid file ...
  float v[2];
  try {
    f.read("steps", 0, 2, v);   // ... whose tensor is not a weight
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor steps has dtype I64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace asteria::hf
