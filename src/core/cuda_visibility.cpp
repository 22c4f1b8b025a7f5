#include "core/cuda_visibility.hpp"

#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace asteria {

bool cuda_device_visible(std::string* why, const std::string& proc_root, const char* visible, bool built_with_cuda) {
  auto no = [why](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!built_with_cuda) return no("this build has no CUDA backend");
  const std::filesystem::path gpus = std::filesystem::path(proc_root.empty() ? "/" : proc_root) / "proc/driver/nvidia/gpus";
  std::error_code ec;
  int found = 0;
  for (auto it = std::filesystem::directory_iterator(gpus, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++found;
  if (found == 0) return no("no NVIDIA GPU listed by the driver (" + gpus.string() + ")");
  if (visible && (std::string_view(visible).empty() || std::string_view(visible).substr(0, 2) == "-1"))
    return no(std::string("CUDA_VISIBLE_DEVICES='") + visible + "' hides every GPU");
  if (why) *why = std::to_string(found) + " NVIDIA GPU(s) listed by the driver";
  return true;
}

bool cuda_device_visible_here(std::string* why) {
  return cuda_device_visible(why, "", std::getenv("CUDA_VISIBLE_DEVICES"));
}

}  // namespace asteria
