// runtime.backend auto's question, answered without a CUDA call (core/cuda_visibility.hpp), on
// fake /proc trees: the build, the driver's GPU list, and CUDA_VISIBLE_DEVICES hiding them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/cuda_visibility.hpp"

namespace asteria {
namespace {

namespace fs = std::filesystem;

struct FakeProc {
  fs::path dir = fs::temp_directory_path() /
                 ("cuda-visibility-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  explicit FakeProc(int gpus) {
    dir += "-" + std::to_string(gpus);
    fs::remove_all(dir);
    fs::create_directories(dir / "proc/driver/nvidia/gpus");
    for (int i = 0; i < gpus; ++i) fs::create_directories(dir / "proc/driver/nvidia/gpus" / ("0000:0" + std::to_string(i) + ":00.0"));
  }
  ~FakeProc() { fs::remove_all(dir); }
};

TEST(CudaVisibility, AGpuListedByTheDriverIsVisibleInACudaBuild) {
  FakeProc p(2);
  std::string why;
  EXPECT_TRUE(cuda_device_visible(&why, p.dir.string(), nullptr, true)) << why;
  EXPECT_NE(why.find("2 NVIDIA GPU(s)"), std::string::npos) << why;
  EXPECT_TRUE(cuda_device_visible(&why, p.dir.string(), "1", true)) << why;
}

TEST(CudaVisibility, NoneWithoutTheBackendTheDriverOrWhenHidden) {
  FakeProc p(1);
  std::string why;
  EXPECT_FALSE(cuda_device_visible(&why, p.dir.string(), nullptr, false));
  EXPECT_NE(why.find("no CUDA backend"), std::string::npos) << why;
  FakeProc none(0);
  EXPECT_FALSE(cuda_device_visible(&why, none.dir.string(), nullptr, true));
  EXPECT_NE(why.find("no NVIDIA GPU listed"), std::string::npos) << why;
  EXPECT_FALSE(cuda_device_visible(&why, (p.dir / "absent").string(), nullptr, true));
  EXPECT_FALSE(cuda_device_visible(&why, p.dir.string(), "", true));
  EXPECT_NE(why.find("hides every GPU"), std::string::npos) << why;
  EXPECT_FALSE(cuda_device_visible(&why, p.dir.string(), "-1", true));
}

}  // namespace
}  // namespace asteria
