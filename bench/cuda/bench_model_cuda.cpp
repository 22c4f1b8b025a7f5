// bench_model_cuda: forward + backward of the whole model on the CUDA backend
// (Model<float, CudaOps>) for a preset, default OLMo-1B at seq 2048: step time (median, p99 and
// max of the timed steps), tokens/s, achieved TFLOP/s with the usual transformer count
// (6 x parameters outside the input embedding + 12 x layers x d_model x seq per token), its
// fraction of the dense bf16 peak (--peak-tflops, default 989: H100/H200 SXM, the MFU
// reference) and of the fp32 CUDA-core peak (--fp32-peak-tflops, default 67), the device's peak
// memory and, when NVML has the counter, energy per token. --precision: the linear layers' GEMM
// operands (bf16, the training default on the GPU, or fp32; values are stored in fp32 either way).
// JSON on stdout.
//   bench_model_cuda [--preset olmo-1b] [--micro-batch 4] [--steps 10] [--attention tiled|full]
//                    [--head-chunk 2048] [--recompute none|blocks] [--precision bf16|fp32]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/backend.hpp"
#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cuda_context.hpp"
#include "core/nvml_energy.hpp"
#include "core/timer.hpp"
#include "model/model.hpp"
#include "model/ops/op_set.hpp"

namespace {

using namespace asteria;

struct Options {
  std::string preset, attention, recompute, precision, backend_name;
  int micro_batch, steps, head_chunk;
  double peak, fp32_peak;
};

nlohmann::json run(const ModelConfig& cfg, const ActivationRecompute& recompute_mode, const Options& o) {
  const auto& [preset, attention, recompute, precision, backend_name, micro_batch, steps, head_chunk, peak,
               fp32_peak] = o;
  const int N = micro_batch * cfg.seq_len;
  size_t free0 = 0, total = 0;
  ASTERIA_CUDA_CHECK(cudaMemGetInfo(&free0, &total));

  Model<float, CudaOps> model(cfg, micro_batch, Model<float, CudaOps>::Storage::Owned, recompute_mode,
                              precision == "bf16" ? ComputePrecision::Bf16 : ComputePrecision::Fp32);
  model.init(1);
  std::vector<int32_t> inputs(N), targets(N);
  for (int i = 0; i < N; i++) {
    inputs[i] = static_cast<int32_t>((i * 7919u + 13u) % cfg.vocab_size);
    targets[i] = static_cast<int32_t>((i * 104729u + 7u) % cfg.vocab_size);
  }
  model.set_batch(inputs.data(), targets.data());
  const size_t embed = model.table(0).numel;
  const size_t non_embedding = model.num_params() - embed + (cfg.tied_embeddings ? embed : 0);
  const double flops_per_token = 6.0 * non_embedding + 12.0 * cfg.n_layers * cfg.d_model * cfg.seq_len;

  NvmlEnergy energy(cuda::current_device_pci_bus_id());   // the GPU computed on
  std::vector<double> step_s, fwd_s;
  double loss = 0, joules = 0;
  const int warmup = 2;
  for (int it = 0; it < warmup + steps; it++) {
    const auto e0 = energy.joules();
    ASTERIA_CUDA_CHECK(cudaDeviceSynchronize());
    Timer t;
    model.zero_grads();
    for (int l = 0; l < model.num_layers(); l++) loss = model.forward(l);   // the head's loss syncs
    const double f = t.seconds();
    for (int l = model.num_layers() - 1; l >= 0; l--) {
      if (model.recomputes(l)) model.recompute(l);
      model.backward(l, 1.0);
    }
    ASTERIA_CUDA_CHECK(cudaDeviceSynchronize());
    const double s = t.seconds();
    const auto e1 = energy.joules();
    if (it < warmup) continue;
    step_s.push_back(s);
    fwd_s.push_back(f);
    if (e0 && e1) joules += *e1 - *e0;
  }
  size_t free1 = 0;
  ASTERIA_CUDA_CHECK(cudaMemGetInfo(&free1, &total));
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const double p99 = sorted[std::min(sorted.size() - 1, static_cast<size_t>(0.99 * sorted.size()))];
  const double tflops = flops_per_token * N / median * 1e-12;
  std::sort(fwd_s.begin(), fwd_s.end());
  nlohmann::json out = {
      {"backend", backend_name}, {"preset", preset}, {"micro_batch", micro_batch}, {"seq_len", cfg.seq_len},
      {"precision", precision + " GEMM operands (values stored in fp32; fp32 GEMMs without TF32)"},
      {"attention", attention}, {"head_chunk", head_chunk}, {"recompute", recompute},
      {"params", model.num_params()}, {"loss", loss}, {"steps", steps},
      {"step_s_median", median}, {"step_s_p99", p99}, {"step_s_max", sorted.back()},
      {"forward_s_median", fwd_s[fwd_s.size() / 2]},
      {"tokens_per_s", N / median}, {"tflops", tflops},
      {"mfu_vs_bf16_peak", tflops / peak}, {"peak_bf16_dense_tflops", peak},
      {"fraction_of_fp32_peak", tflops / fp32_peak}, {"peak_fp32_tflops", fp32_peak},
      {"device_memory_used_bytes", free0 - free1}, {"activation_bytes", model.activation_bytes()}};
  if (energy.available()) out["energy_j_per_token"] = joules / (static_cast<double>(N) * steps);
  else out["energy"] = "not available: " + energy.why_not();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace asteria;
  std::string preset = "olmo-1b", attention = "tiled", recompute = "none", precision = "bf16";
  int micro_batch = 4, steps = 10, head_chunk = 2048;
  double peak = 989, fp32_peak = 67;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--preset") preset = v;
    else if (k == "--micro-batch") micro_batch = std::atoi(v.c_str());
    else if (k == "--steps") steps = std::atoi(v.c_str());
    else if (k == "--attention") attention = v;
    else if (k == "--head-chunk") head_chunk = std::atoi(v.c_str());
    else if (k == "--recompute") recompute = v;
    else if (k == "--precision") precision = v;
    else if (k == "--peak-tflops") peak = std::atof(v.c_str());
    else if (k == "--fp32-peak-tflops") fp32_peak = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "bench_model_cuda: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::string why;
  if (!cuda_backend_available(&why)) {
    std::fprintf(stderr, "bench_model_cuda: no GPU: %s\n", why.c_str());
    return 1;
  }
  if (steps < 1 || micro_batch < 1 || (attention != "tiled" && attention != "full") ||
      (recompute != "none" && recompute != "blocks") || (precision != "bf16" && precision != "fp32")) {
    std::fprintf(stderr, "bench_model_cuda: bad option value\n");
    return 2;
  }
  auto backend = make_cuda_backend(0);
  ModelConfig cfg = model_preset(preset);
  cfg.attention = attention == "tiled" ? AttentionKind::Tiled : AttentionKind::Full;
  cfg.head_chunk = head_chunk;
  ActivationRecompute recompute_mode;
  recompute_mode.mode = recompute == "blocks" ? ActivationRecompute::Mode::Blocks : ActivationRecompute::Mode::None;
  const Options o{preset, attention, recompute, precision, backend->name(), micro_batch, steps, head_chunk, peak, fp32_peak};
  const nlohmann::json out = run(cfg, recompute_mode, o);
  std::printf("%s\n", out.dump(1).c_str());
  return 0;
}
