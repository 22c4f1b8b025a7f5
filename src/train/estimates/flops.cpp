#include "train/estimates/flops.hpp"

#include <fstream>
#include <string>

#include "core/cpu/blas_kernels.hpp"
#include "model/model.hpp"

namespace asteria {

ParamCounts count_params(const ModelConfig& m) {
  ParamCounts c;
  for (const ParamTable& t : model_param_tables(m))
    for (const ParamEntry& e : t.entries) {
      c.total += static_cast<int64_t>(e.numel);
      if (e.cls == ParamClass::Embedding) c.embedding += static_cast<int64_t>(e.numel);
      else if (e.cls == ParamClass::Matrix) c.matrices += static_cast<int64_t>(e.numel);
      else c.norms += static_cast<int64_t>(e.numel);
    }
  return c;
}

double training_flops_per_token(const ModelConfig& m) {
  const double wte = static_cast<double>(m.embedding_size) * m.d_model;
  double outside_input_embedding = static_cast<double>(count_params(m).total) - wte;
  if (m.tied_embeddings) outside_input_embedding += wte;  // the head's matmul
  return 6.0 * outside_input_embedding + 12.0 * m.n_layers * m.d_model * m.seq_len;
}

const char* training_flops_formula() {
  return "6 * (params outside the input embedding, LM head counted once) + 12 * n_layers * d_model * seq_len";
}

int cpu_fma_flops_per_cycle() {
  const CpuFeatures cpu = detect_cpu();
  const bool half_width_avx512 = cpu.vendor == "amd" && cpu.family == 25;   // Zen 4
  return cpu.avx512 && !half_width_avx512 ? 64 : 32;
}

double cpu_peak_flops(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu MHz", 0) == 0) {
      auto colon = line.find(':');
      if (colon == std::string::npos) break;
      double mhz = std::stod(line.substr(colon + 1));
      return threads * mhz * 1e6 * cpu_fma_flops_per_cycle();
    }
  }
  return 0.0;
}

}  // namespace asteria
