#pragma once
// A GPU's energy counter through NVML, loaded at run time: libnvidia-ml.so.1 comes with the
// driver, not the toolkit, so no build links it and a machine without a driver simply has no
// counter. joules() is the energy the device used since the driver loaded (NVML's
// nvmlDeviceGetTotalEnergyConsumption, Volta and later); differences of two readings give the
// energy of what ran between them (`energy_j` in metrics).
#include <optional>
#include <string>

namespace asteria {

class NvmlEnergy {
 public:
  // The GPU of NVML index `device` (NVML's order: it ignores CUDA_VISIBLE_DEVICES).
  explicit NvmlEnergy(int device = 0);
  // The GPU at a PCI bus id ("0000:19:00.0", as cudaDeviceGetPCIBusId gives it): the CUDA
  // device a process computes on, whatever CUDA_VISIBLE_DEVICES renumbered.
  explicit NvmlEnergy(const std::string& pci_bus_id);
  ~NvmlEnergy();
  NvmlEnergy(const NvmlEnergy&) = delete;
  NvmlEnergy& operator=(const NvmlEnergy&) = delete;

  bool available() const { return device_ != nullptr; }
  const std::string& why_not() const { return why_not_; }   // when not available
  std::optional<double> joules() const;

 private:
  // Opens NVML and the device find(&handle) looks up (NVML's result: 0 found); else why_not_ says why.
  template <class Find>
  void open(Find find);

  void* lib_ = nullptr;
  void* device_ = nullptr;   // nvmlDevice_t
  void* read_ = nullptr;     // nvmlDeviceGetTotalEnergyConsumption
  void* shutdown_ = nullptr;
  std::string why_not_;
};

}  // namespace asteria
