// The packages' RAPL counters (contract: core/cpu/rapl_energy.hpp).
#include "core/cpu/rapl_energy.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace asteria {

namespace {

// The first line of a sysfs file, or nullopt when it cannot be read.
std::optional<std::string> read_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<double> read_number(const std::filesystem::path& p) {
  const std::optional<std::string> s = read_line(p);
  if (!s) return std::nullopt;
  try {
    return std::stod(*s);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

RaplEnergy::RaplEnergy(const std::string& powercap) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(powercap, ec)) {
    why_not_ = "no RAPL energy counters: " + powercap + " does not exist (a virtual machine or a container without powercap)";
    return;
  }
  std::vector<fs::path> domains;
  for (const auto& e : fs::directory_iterator(powercap, ec)) {
    const std::string name = e.path().filename().string();
    // Top-level package domains only ("intel-rapl:0"), not their subzones ("intel-rapl:0:0").
    if (name.rfind("intel-rapl:", 0) == 0 && name.find(':', 11) == std::string::npos) domains.push_back(e.path());
  }
  std::sort(domains.begin(), domains.end());
  for (const fs::path& d : domains) {
    const std::optional<std::string> name = read_line(d / "name");
    if (!name || name->rfind("package", 0) != 0) continue;
    const std::optional<double> range = read_number(d / "max_energy_range_uj");
    if (!read_number(d / "energy_uj") || !range || *range <= 0) {
      why_not_ = "RAPL energy counter " + (d / "energy_uj").string() + " cannot be read (root only since Linux 5.10)";
      packages_.clear();
      return;
    }
    packages_.push_back({(d / "energy_uj").string(), *range});
  }
  if (packages_.empty()) why_not_ = "no RAPL package domain under " + powercap + " (this CPU or kernel exposes none)";
}

std::optional<double> RaplEnergy::joules() const {
  if (packages_.empty()) return std::nullopt;
  double total_uj = 0;
  for (const Package& p : packages_) {
    const std::optional<double> uj = read_number(p.energy_uj);
    if (!uj) return std::nullopt;
    if (p.last_uj >= 0 && *uj < p.last_uj) p.wraps_uj += p.range_uj;   // the counter wrapped
    p.last_uj = *uj;
    total_uj += p.wraps_uj + *uj;
  }
  return total_uj * 1e-6;
}

}  // namespace asteria
