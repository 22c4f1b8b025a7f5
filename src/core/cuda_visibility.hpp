#pragma once
// Whether a CUDA device is there for this process, found without any CUDA call: the CUDA runtime
// fixes the devices it sees at its first call, and each rank must narrow CUDA_VISIBLE_DEVICES to
// its own GPU before that (train/rank_device.hpp). runtime.backend auto resolves with it.
#include <string>

namespace asteria {

// True when this build has the CUDA backend, the NVIDIA driver lists a GPU
// (<proc_root>/proc/driver/nvidia/gpus/*) and CUDA_VISIBLE_DEVICES (`visible`, null when unset)
// does not hide them all (empty, or starting with -1). Otherwise false with the reason in *why.
bool cuda_device_visible(std::string* why = nullptr, const std::string& proc_root = "", const char* visible = nullptr,
                         bool built_with_cuda =
#ifdef ASTERIA_HAVE_CUDA
                             true
#else
                             false
#endif
);
// The same for this process: the real /proc and its CUDA_VISIBLE_DEVICES.
bool cuda_device_visible_here(std::string* why = nullptr);

}  // namespace asteria
