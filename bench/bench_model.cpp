// Micro benchmark of the model: forward + backward of Model<float> for a preset (default
// bench-small, batch 8), with tokens/s, achieved GFLOP/s against the usual transformer FLOP
// count, OpenBLAS sgemm's own rate on the model's GEMM shapes for comparison, and a per-layer
// and per-op time breakdown.
//
//   bench_model [preset] [batch] [iters]
//
// FLOPs per token = 6 * (parameters outside the input embedding) + 12 * layers * d_model * seq
// (the second term is attention's QK^T and PV, counted without the causal saving).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/cpu/blas_kernels.hpp"
#include "core/buffer.hpp"
#include "core/cpu/gemm.hpp"
#include "core/timer.hpp"
#include "model/model.hpp"
#include "model/ops/attention.hpp"
#include "model/ops/attention_tiled.hpp"
#include "model/ops/cross_entropy.hpp"
#include "model/ops/rmsnorm.hpp"
#include "model/ops/rope.hpp"
#include "model/ops/swiglu.hpp"

using namespace asteria;

namespace {

// Median of `reps` timings of fn (after one warmup call), in seconds.
template <class Fn>
double time_median(Fn&& fn, int reps = 7) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; i++) {
    Timer timer;
    fn();
    t.push_back(timer.seconds());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void fill(Buffer<float>& b, float scale) {
  uint64_t s = 88172645463325252ull;
  for (size_t i = 0; i < b.size(); i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    b[i] = scale * (static_cast<float>(s >> 40) / 16777216.0f - 0.5f);
  }
}

// One GEMM shape the model runs, with its own buffers, timed one call at a time so that the
// calls can be interleaved with model steps (both then see the same machine load).
struct GemmProbe {
  const char* what;
  int M, N, K;
  bool trans_a, trans_b;
  Buffer<float> A, B, C;
  std::vector<double> seconds;

  GemmProbe(const char* w, int m, int n, int k, bool ta, bool tb)
      : what(w), M(m), N(n), K(k), trans_a(ta), trans_b(tb),
        A(static_cast<size_t>(m) * k), B(static_cast<size_t>(k) * n),
        C(static_cast<size_t>(m) * n) {
    fill(A, 1.0f);
    fill(B, 1.0f);
  }
  double run() {
    Timer t;
    cpu::gemm(trans_a, trans_b, M, N, K, 1.0f, A.data(), trans_a ? M : K, B.data(),
              trans_b ? K : N, 0.0f, C.data(), N);
    return t.seconds();
  }
  double gflops(double s) const { return 2.0 * M * N * K / s * 1e-9; }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // The right BLAS kernels for this CPU, before any BLAS call (core/cpu/blas_kernels.hpp).
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  const std::string preset = argc > 1 ? argv[1] : "bench-small";
  const int batch = argc > 2 ? std::atoi(argv[2]) : 8;
  const int iters = argc > 3 ? std::atoi(argv[3]) : 10;
  const int warmup = 2;
  const ModelConfig cfg = model_preset(preset);
  const int L = cfg.n_layers, C = cfg.d_model, F = cfg.mlp_hidden, T = cfg.seq_len,
            V = cfg.vocab_size, NH = cfg.n_heads, N = batch * T;

  Model<float> model(cfg, batch);
  model.init(1);
  std::vector<int32_t> inputs(N), targets(N);
  for (int i = 0; i < N; i++) {
    inputs[i] = static_cast<int32_t>((i * 7919u + 13u) % V);
    targets[i] = static_cast<int32_t>((i * 104729u + 7u) % V);
  }
  model.set_batch(inputs.data(), targets.data());

  // Reference: OpenBLAS sgemm alone on the model's biggest GEMM shapes.
  std::vector<GemmProbe> probes;
  probes.reserve(3);
  probes.emplace_back("mlp_up fwd   [N,2F]=[N,C][2F,C]^T", N, 2 * F, C, false, true);
  probes.emplace_back("mlp_down fwd [N,C]=[N,F][C,F]^T", N, C, F, false, true);
  probes.emplace_back("lm_head dW   [V,C]=[N,V]^T[N,C]", V, C, N, true, false);

  size_t embed = model.table(0).numel;
  const size_t non_embedding = model.num_params() - embed + (cfg.tied_embeddings ? embed : 0);
  const double flops_per_token = 6.0 * non_embedding + 12.0 * L * C * T;

  const int n_layers = model.num_layers();
  std::vector<double> t_fwd(n_layers, 0), t_bwd(n_layers, 0);
  std::vector<double> steps, ratios;  // per timed step: seconds, model rate / sgemm rate
  double loss = 0;
  for (int it = 0; it < warmup + iters; it++) {
    const bool timed = it >= warmup;
    Timer step;
    model.zero_grads();
    for (int l = 0; l < n_layers; l++) {
      Timer t;
      loss = model.forward(l);
      if (timed) t_fwd[l] += t.seconds();
    }
    for (int l = n_layers - 1; l >= 0; l--) {
      Timer t;
      model.backward(l, 1.0);
      if (timed) t_bwd[l] += t.seconds();
    }
    const double step_s = step.seconds();
    double sgemm_rate = 0;
    for (auto& p : probes) {
      const double s = p.run();
      if (timed) p.seconds.push_back(s);
      sgemm_rate += p.gflops(s) / probes.size();
    }
    if (timed) {
      steps.push_back(step_s);
      ratios.push_back(flops_per_token * N / step_s * 1e-9 / sgemm_rate);
    }
  }

  // Medians: the machines are shared, and a mean is hostage to one bad step.
  const double step_s = median(steps);
  const double best_s = *std::min_element(steps.begin(), steps.end());
  const double tok_s = N / step_s;
  const double gflops = flops_per_token * tok_s * 1e-9;

  std::printf("preset %s  batch %d  seq %d  d_model %d  layers %d  heads %d  hidden %d  vocab %d\n",
              preset.c_str(), batch, T, C, L, NH, F, V);
  std::printf("threads %d  params %zu (%zu outside the input embedding)  activations %.1f MB\n",
              omp_get_max_threads(), model.num_params(), non_embedding,
              model.activation_bytes() / 1e6);
  std::printf("loss %.4f (ln V = %.4f)\n", loss, std::log(static_cast<double>(V)));
  std::printf("\nstep (fwd+bwd, median of %d) %.1f ms  |  %.0f tokens/s  |  %.1f GFLOP/s  "
              "(%.1f MFLOP/token)\n",
              iters, step_s * 1e3, tok_s, gflops, flops_per_token * 1e-6);
  std::printf("best step %.1f ms  |  %.0f tokens/s  |  %.1f GFLOP/s\n", best_s * 1e3, N / best_s,
              flops_per_token * N / best_s * 1e-9);

  std::printf("\nOpenBLAS sgemm alone on the model's shapes (median, interleaved with steps):\n");
  for (const auto& p : probes)
    std::printf("  %-38s %7.1f GFLOP/s\n", p.what, p.gflops(median(p.seconds)));
  std::printf("model rate / mean sgemm rate on its shapes (median of per-step ratios): %.0f%%\n",
              100 * median(ratios));

  std::printf("\nper layer (ms per step, mean):  forward   backward\n");
  for (int l = 0; l < n_layers; l++)
    std::printf("  %-26s %8.2f %10.2f\n", model.layer_name(l).c_str(), t_fwd[l] / iters * 1e3,
                t_bwd[l] / iters * 1e3);  // (means)

  // Per-op breakdown: the non-GEMM ops alone at the model's shapes (ms per call, median).
  Buffer<float> qkv(static_cast<size_t>(N) * 3 * C), att(static_cast<size_t>(batch) * NH * T * T),
      y(static_cast<size_t>(N) * C), dqkv(static_cast<size_t>(N) * 3 * C),
      slabs(static_cast<size_t>(omp_get_max_threads()) * T * T), up(static_cast<size_t>(N) * 2 * F),
      act(static_cast<size_t>(N) * F), dup(static_cast<size_t>(N) * 2 * F),
      logits(static_cast<size_t>(N) * V), x(static_cast<size_t>(N) * C),
      w(static_cast<size_t>(C)), rstd(static_cast<size_t>(N)), dw(static_cast<size_t>(C)),
      cs(static_cast<size_t>(T) * C / NH / 2), sn(static_cast<size_t>(T) * C / NH / 2);
  fill(qkv, 2.0f);
  fill(up, 4.0f);
  fill(x, 2.0f);
  for (size_t i = 0; i < w.size(); i++) w[i] = 1.0f;
  ops::rope_tables(cs.data(), sn.data(), T, C / NH, cfg.rope_theta);
  const int hd = C / NH;
  std::printf("\nper op, one call at these shapes (ms):\n");
  std::printf("  %-34s %8.2f\n", "attention fwd (per layer)", 1e3 * time_median([&] {
    ops::attention_forward(y.data(), att.data(), qkv.data(), batch, T, C, NH);
  }));
  std::printf("  %-34s %8.2f\n", "attention bwd (per layer)", 1e3 * time_median([&] {
    ops::attention_backward(dqkv.data(), slabs.data(), omp_get_max_threads(), y.data(), qkv.data(),
                            att.data(), batch, T, C, NH);
  }));
  {
    const int threads = omp_get_max_threads();
    std::vector<float> stats(static_cast<size_t>(batch) * NH * 2 * T),
        tiles(threads * ops::attention_tiled_scratch_per_thread(T));
    std::printf("  %-34s %8.2f\n", "attention tiled fwd (per layer)", 1e3 * time_median([&] {
      ops::attention_tiled_forward(y.data(), stats.data(), tiles.data(), threads, qkv.data(), batch,
                                   T, C, NH);
    }));
    std::printf("  %-34s %8.2f\n", "attention tiled bwd (per layer)", 1e3 * time_median([&] {
      ops::attention_tiled_backward(dqkv.data(), tiles.data(), threads, y.data(), qkv.data(),
                                    stats.data(), batch, T, C, NH);
    }));
  }
  std::printf("  %-34s %8.2f\n", "rope fwd q+k", 1e3 * time_median([&] {
    ops::rope_forward(qkv.data(), 3 * C, N, T, 2 * NH, hd, cs.data(), sn.data());
  }));
  std::printf("  %-34s %8.2f\n", "rmsnorm fwd", 1e3 * time_median([&] {
    ops::rmsnorm_forward(y.data(), C, rstd.data(), x.data(), C, w.data(),
                         static_cast<const float*>(nullptr), N, C, 1e-5);
  }));
  std::printf("  %-34s %8.2f\n", "rmsnorm bwd", 1e3 * time_median([&] {
    ops::rmsnorm_backward(y.data(), C, dw.data(), x.data(), C, x.data(), C, w.data(), rstd.data(),
                          N, C, 1.0f, false);
  }));
  std::printf("  %-34s %8.2f\n", "swiglu fwd", 1e3 * time_median([&] {
    ops::swiglu_forward(act.data(), up.data(), N, F);
  }));
  std::printf("  %-34s %8.2f\n", "swiglu bwd", 1e3 * time_median([&] {
    ops::swiglu_backward(dup.data(), act.data(), up.data(), N, F);
  }));
  std::printf("  %-34s %8.2f\n", "cross-entropy fused", 1e3 * time_median([&] {
    fill(logits, 8.0f);  // (refill: the op overwrites logits; fill time included)
    ops::cross_entropy_fused(logits.data(), targets.data(), N, V, 0.0);
  }));
  std::printf("  %-34s %8.2f\n", "  (refill of logits alone)", 1e3 * time_median([&] {
    fill(logits, 8.0f);
  }));
  return 0;
}
