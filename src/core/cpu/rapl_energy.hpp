#pragma once
// The CPU packages' energy counters through Linux's powercap RAPL interface: the package domains
// /sys/class/powercap/intel-rapl:N (named "package-N"; AMD's packages appear there too since
// Linux 5.8). joules() is the sum over the packages of energy_uj, unwrapped across the counters'
// wrap at max_energy_range_uj, so differences of two readings are the packages' energy between
// them (`energy_j` in metrics): every process on those packages counts, not only this one.
// Not available where no package domain is exposed (virtual machines, containers without
// /sys/class/powercap) or its counter cannot be read (energy_uj is root's since Linux 5.10):
// why_not() says which, and run_info.json repeats it instead of a number.
#include <optional>
#include <string>
#include <vector>

namespace asteria {

class RaplEnergy {
 public:
  explicit RaplEnergy(const std::string& powercap = "/sys/class/powercap");

  bool available() const { return !packages_.empty(); }
  const std::string& why_not() const { return why_not_; }   // when not available
  // The packages' energy since the first reading's counters started, in joules; nullopt when not
  // available or a counter could not be read. Call it from one thread (it tracks the wraps).
  std::optional<double> joules() const;

 private:
  struct Package {
    std::string energy_uj;   // the counter's path
    double range_uj = 0;     // where it wraps
    mutable double last_uj = -1, wraps_uj = 0;
  };
  std::vector<Package> packages_;
  std::string why_not_;
};

}  // namespace asteria
