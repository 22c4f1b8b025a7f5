#include "core/nvml_energy.hpp"

#include <dlfcn.h>

namespace asteria {

namespace {
// The few NVML entry points used, with their C signatures (nvml.h is not in the toolkit here).
using InitFn = int (*)();
using IndexFn = int (*)(unsigned, void**);
using BusIdFn = int (*)(const char*, void**);
using EnergyFn = int (*)(void*, unsigned long long*);   // millijoules
using ShutdownFn = int (*)();
}  // namespace

template <class Find>
void NvmlEnergy::open(Find find) {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    why_not_ = "libnvidia-ml.so.1 not found (no NVIDIA driver)";
    return;
  }
  auto init = reinterpret_cast<InitFn>(dlsym(lib_, "nvmlInit_v2"));
  read_ = dlsym(lib_, "nvmlDeviceGetTotalEnergyConsumption");
  shutdown_ = dlsym(lib_, "nvmlShutdown");
  if (!init || !read_ || init() != 0) {
    why_not_ = "NVML did not initialize";
    return;
  }
  void* dev = nullptr;
  unsigned long long mj = 0;
  if (find(&dev) != 0 || reinterpret_cast<EnergyFn>(read_)(dev, &mj) != 0) {
    why_not_ = "this GPU has no NVML energy counter";
    return;
  }
  device_ = dev;
}

NvmlEnergy::NvmlEnergy(int device) {
  open([this, device](void** dev) {
    auto by_index = reinterpret_cast<IndexFn>(dlsym(lib_, "nvmlDeviceGetHandleByIndex_v2"));
    return by_index ? by_index(static_cast<unsigned>(device), dev) : -1;
  });
}

NvmlEnergy::NvmlEnergy(const std::string& pci_bus_id) {
  open([this, &pci_bus_id](void** dev) {
    auto by_bus = reinterpret_cast<BusIdFn>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    return by_bus ? by_bus(pci_bus_id.c_str(), dev) : -1;
  });
}

NvmlEnergy::~NvmlEnergy() {
  if (lib_ && shutdown_ && device_) reinterpret_cast<ShutdownFn>(shutdown_)();
  if (lib_) dlclose(lib_);
}

std::optional<double> NvmlEnergy::joules() const {
  if (!device_) return std::nullopt;
  unsigned long long mj = 0;
  if (reinterpret_cast<EnergyFn>(read_)(device_, &mj) != 0) return std::nullopt;
  return static_cast<double>(mj) * 1e-3;
}

}  // namespace asteria
