// bench_sgemm: the CPU backend's GEMM GFLOP/s at the GEMM shapes of one bench-small training step
// (d 256, 4 layers, 4 heads of 64, seq 256, micro-batch 8, SwiGLU hidden 1024, vocab 4096,
// untied head), in the forms the model uses (src/model/ops/linear.cpp, attention.cpp):
//
//   linear, W [out, in] row-major, X [M, in], M = B*T = 2048:
//     forward  Y  = X W^T      gemm(N,T)  M x out x in
//     backward dX = dY W       gemm(N,N)  M x in  x out
//              dW = dY^T X     gemm(T,N)  out x in x M
//   attention, per head (T = 256, hd = 64), q/k/v strided inside the fused qkv rows (ld 3C):
//     forward  S  = Q K^T      (N,T) 256x256x64     O  = P V     (N,N) 256x64x256
//     backward dP = dO V^T     (N,T) 256x256x64     dQ = dS K    (N,N) 256x64x256
//              dK = dS^T Q     (T,N) 256x64x256     dV = P^T dO  (T,N) 256x64x256
//     run as a batch of B*H = 32 heads in two ways: "omp" (an OpenMP loop over heads, each gemm
//     single-threaded, as the model does) and "seq" (heads one after another, each gemm using
//     all OpenBLAS threads). The weighted average uses the faster of the two per shape.
//
// Each shape's weight is the FLOPs it contributes to one step (2 M N K x calls per step); the
// attention products are counted dense (T x T), as the FLOP formula 12 L d T does. The weighted
// average rate is sum(FLOPs) / sum(FLOPs / rate), i.e. the rate at which one step's GEMMs would
// run back to back. Rates are medians of `repeats` samples taken round-robin over all cases
// (a shared machine is noisy); the best sample is reported beside them. Output: one JSON object
// on stdout.
//
// --gemm openblas | onednn | auto (runtime.gemm's routing of every fp32 call; default auto) or
// bf16: the linear shapes on oneDNN's bf16 kernels (operands packed to bf16 beforehand, as the
// model's weight copy is; attention stays fp32, as in the model).
//
// Usage: bench_sgemm [--min-time SECONDS] [--repeats N] [--gemm openblas|onednn|auto|bf16]
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cpu/blas_kernels.hpp"
#include "core/bf16.hpp"
#include "core/cpu/gemm.hpp"
#include "core/cpu/gemm_routing.hpp"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int B = 8, T = 256, C = 256, L = 4, NH = 4, HD = C / NH, F = 1024, V = 4096;
constexpr int M = B * T;

std::vector<float> random_buffer(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (auto& x : v) x = d(rng);
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One sample of fn: as many calls as fit in min_time (at least one); seconds per call.
double sample(const std::function<void()>& fn, double min_time) {
  int calls = 0;
  const auto t0 = Clock::now();
  double el = 0;
  do {
    fn();
    calls++;
    el = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (el < min_time);
  return el / calls;
}

// Cases are measured round-robin (case 1, case 2, ..., then again) so that a burst of load
// from other processes on a shared machine spreads over all shapes instead of hitting one.
struct Case {
  std::function<void()> fn;
  std::vector<double> samples;
};
void measure_all(std::vector<Case>& cases, double min_time, int repeats) {
  for (auto& c : cases) c.fn();  // warm-up
  for (int r = 0; r < repeats; r++)
    for (auto& c : cases) c.samples.push_back(sample(c.fn, min_time));
}

struct Result {
  std::string name, form;
  int m, n, k, batch;
  double calls_per_step;  // gemm calls (of the batch) per training step
  double seconds;         // per call (of the batch)
  double flops() const { return 2.0 * m * n * k * batch; }
  double gflops() const { return flops() / seconds * 1e-9; }
  double step_flops() const { return flops() * calls_per_step; }
};

std::string loaded_openblas() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) && info.dli_fname) {
    char buf[4096];
    if (realpath(info.dli_fname, buf)) return buf;
    return info.dli_fname;
  }
  return "unknown";
}

const char* parallel_name(int p) {
  return p == 0 ? "sequential" : p == 1 ? "pthread" : p == 2 ? "openmp" : "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  // The right BLAS kernels for this CPU, before any BLAS call (core/cpu/blas_kernels.hpp).
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  double min_time = 0.15;
  int repeats = 5;
  std::string gemm = "auto";
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--min-time" && i + 1 < argc) min_time = std::atof(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (a == "--gemm" && i + 1 < argc) gemm = argv[++i];
    else {
      std::cerr << "usage: bench_sgemm [--min-time SECONDS] [--repeats N] [--gemm openblas|onednn|auto|bf16]\n";
      return 2;
    }
  }
  const bool bf16 = gemm == "bf16";
  if (gemm == "openblas") asteria::set_gemm_choice(asteria::GemmChoice::OpenBlas);
  else if (gemm == "onednn") asteria::set_gemm_choice(asteria::GemmChoice::OneDnn);
  else if (gemm == "auto" || bf16) asteria::set_gemm_choice(asteria::GemmChoice::Auto);
  else {
    std::cerr << "bench_sgemm: --gemm must be openblas, onednn, auto or bf16\n";
    return 2;
  }
  if (bf16 && !asteria::cpu::bf16_gemm_available()) {
    std::cerr << "bench_sgemm: no oneDNN bf16 kernels on this CPU\n";
    return 3;
  }

  // Buffers big enough for every linear shape.
  const size_t big = static_cast<size_t>(M) * std::max({3 * C, 2 * F, V});
  std::vector<float> A = random_buffer(big, 1), Bm = random_buffer(big, 2), Cm(big, 0.f);
  std::vector<uint16_t> A16(big), B16(big);
  for (size_t i = 0; i < big; i++) {
    A16[i] = asteria::to_bf16(A[i]).bits;
    B16[i] = asteria::to_bf16(Bm[i]).bits;
  }
  // One linear GEMM in the bench's precision.
  auto lin_gemm = [&](bool ta, bool tb, int m, int n, int k, int lda, int ldb, float beta, int ldc) {
    if (bf16)
      asteria::cpu::gemm_bf16(ta, tb, m, n, k, 1.f, A16.data(), lda, B16.data(), ldb, beta, Cm.data(), ldc);
    else
      asteria::cpu::gemm(ta, tb, m, n, k, 1.f, A.data(), lda, Bm.data(), ldb, beta, Cm.data(), ldc);
  };

  struct Lin {
    const char* name;
    int out, in;
    int per_step;  // layers using it
  };
  const Lin lins[] = {{"qkv", 3 * C, C, L},
                      {"att_out", C, C, L},
                      {"mlp_up", 2 * F, C, L},
                      {"mlp_down", C, F, L},
                      {"lm_head", V, C, 1}};
  std::vector<Result> results;
  std::vector<Case> cases;
  for (const Lin& l : lins) {
    // forward: Y[M,out] = X[M,in] W[out,in]^T
    results.push_back({l.name, "fwd NT (Y = X W^T)", M, l.out, l.in, 1, double(l.per_step), 0});
    cases.push_back({[&, l] { lin_gemm(false, true, M, l.out, l.in, l.in, l.in, 0.f, l.out); }, {}});
    // backward dX[M,in] = dY[M,out] W[out,in]
    results.push_back({l.name, "bwd dX NN (dX = dY W)", M, l.in, l.out, 1, double(l.per_step), 0});
    cases.push_back({[&, l] { lin_gemm(false, false, M, l.in, l.out, l.out, l.in, 0.f, l.in); }, {}});
    // backward dW[out,in] += dY^T[out,M] X[M,in]
    results.push_back({l.name, "bwd dW TN (dW += dY^T X)", l.out, l.in, M, 1, double(l.per_step), 0});
    cases.push_back({[&, l] { lin_gemm(true, false, l.out, l.in, M, l.out, l.in, 1.f, l.in); }, {}});
  }
  const size_t n_lin_cases = cases.size();

  // Attention: fused qkv [B, T, 3C] (q | k | v, heads inside), P/dS [B*H, T, T], dO/O [B, T, C].
  std::vector<float> qkv = random_buffer(static_cast<size_t>(M) * 3 * C, 3);
  std::vector<float> P = random_buffer(static_cast<size_t>(B) * NH * T * T, 4);
  std::vector<float> S(P.size(), 0.f);
  std::vector<float> dO = random_buffer(static_cast<size_t>(M) * C, 5);
  std::vector<float> out(static_cast<size_t>(M) * 3 * C, 0.f);
  const int ld = 3 * C;
  struct Att {
    const char* name;
    const char* form;
    int m, n, k;
  };
  const Att atts[] = {{"att_scores", "fwd NT (S = Q K^T)", T, T, HD},
                      {"att_values", "fwd NN (O = P V)", T, HD, T},
                      {"att_dP", "bwd NT (dP = dO V^T)", T, T, HD},
                      {"att_dQ", "bwd NN (dQ = dS K)", T, HD, T},
                      {"att_dK", "bwd TN (dK = dS^T Q)", T, HD, T},
                      {"att_dV", "bwd TN (dV = P^T dO)", T, HD, T}};
  auto head_gemm = [&](int which, int bh) {
    const int b = bh / NH, h = bh % NH;
    const float* q = qkv.data() + static_cast<size_t>(b) * T * ld + static_cast<size_t>(h) * HD;
    const float* k = q + C;
    const float* v = q + 2 * C;
    const float* p = P.data() + static_cast<size_t>(bh) * T * T;
    float* s = S.data() + static_cast<size_t>(bh) * T * T;
    const float* o = dO.data() + static_cast<size_t>(b) * T * C + static_cast<size_t>(h) * HD;
    float* r = out.data() + static_cast<size_t>(b) * T * ld + static_cast<size_t>(h) * HD;
    switch (which) {
      case 0: asteria::cpu::gemm(false, true, T, T, HD, 0.125f, q, ld, k, ld, 0.f, s, T); break;
      case 1: asteria::cpu::gemm(false, false, T, HD, T, 1.f, p, T, v, ld, 0.f, r, ld); break;
      case 2: asteria::cpu::gemm(false, true, T, T, HD, 1.f, o, C, v, ld, 0.f, s, T); break;
      case 3: asteria::cpu::gemm(false, false, T, HD, T, 0.125f, p, T, k, ld, 0.f, r, ld); break;
      case 4: asteria::cpu::gemm(true, false, T, HD, T, 0.125f, p, T, q, ld, 0.f, r, ld); break;
      default: asteria::cpu::gemm(true, false, T, HD, T, 1.f, p, T, o, C, 0.f, r, ld); break;
    }
  };
  for (int w = 0; w < 6; w++) {
    cases.push_back({[&, w] {  // "omp": OpenMP loop over heads, single-threaded gemms
#pragma omp parallel for schedule(dynamic, 1)
      for (int bh = 0; bh < B * NH; bh++) head_gemm(w, bh);
    }, {}});
    cases.push_back({[&, w] {  // "seq": heads in turn, each gemm threaded by OpenBLAS
      for (int bh = 0; bh < B * NH; bh++) head_gemm(w, bh);
    }, {}});
  }

  measure_all(cases, min_time, repeats);

  for (size_t i = 0; i < n_lin_cases; i++) results[i].seconds = median(cases[i].samples);
  nlohmann::json attention_modes = nlohmann::json::array();
  for (int w = 0; w < 6; w++) {
    const Att& a = atts[w];
    const double s_omp = median(cases[n_lin_cases + 2 * w].samples);
    const double s_seq = median(cases[n_lin_cases + 2 * w + 1].samples);
    const double flops = 2.0 * a.m * a.n * a.k * B * NH;
    attention_modes.push_back({{"name", a.name},
                               {"gflops_omp_over_heads", flops / s_omp * 1e-9},
                               {"gflops_seq_heads_threaded_gemm", flops / s_seq * 1e-9}});
    results.push_back({a.name, std::string(a.form) + (s_omp <= s_seq ? " [omp over heads]" : " [seq heads]"),
                       a.m, a.n, a.k, B * NH, double(L), std::min(s_omp, s_seq)});
  }
  // Best sample of each case (least disturbed by other load), for reference.
  std::vector<double> best_seconds;
  for (size_t i = 0; i < n_lin_cases; i++)
    best_seconds.push_back(*std::min_element(cases[i].samples.begin(), cases[i].samples.end()));
  for (int w = 0; w < 6; w++) {
    auto& so = cases[n_lin_cases + 2 * w].samples;
    auto& ss = cases[n_lin_cases + 2 * w + 1].samples;
    best_seconds.push_back(std::min(*std::min_element(so.begin(), so.end()),
                                    *std::min_element(ss.begin(), ss.end())));
  }

  double total_flops = 0, total_seconds = 0, lin_flops = 0, lin_seconds = 0, best_total = 0;
  for (size_t i = 0; i < results.size(); i++) best_total += best_seconds[i] * results[i].calls_per_step;
  nlohmann::json shapes = nlohmann::json::array();
  for (const Result& r : results) {
    const double f = r.step_flops(), t = r.seconds * r.calls_per_step;
    total_flops += f;
    total_seconds += t;
    if (r.name.rfind("att_", 0) != 0) {
      lin_flops += f;
      lin_seconds += t;
    }
    shapes.push_back({{"name", r.name},
                      {"form", r.form},
                      {"m", r.m},
                      {"n", r.n},
                      {"k", r.k},
                      {"batch", r.batch},
                      {"calls_per_step", r.calls_per_step},
                      {"gflops", r.gflops()},
                      {"gflops_best", r.flops() / best_seconds[&r - results.data()] * 1e-9},
                      {"step_flop_share", 0.0}});
  }
  for (auto& s : shapes) {
    const double f = 2.0 * s["m"].get<int>() * s["n"].get<int>() * s["k"].get<int>() *
                     s["batch"].get<int>() * s["calls_per_step"].get<double>();
    s["step_flop_share"] = f / total_flops;
  }

  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  const char* l2 = std::getenv("OPENBLAS_L2_SIZE");
  const char* omp_env = std::getenv("OMP_NUM_THREADS");
  nlohmann::json j = {
      {"bench", "sgemm"},
      {"model", "bench-small B8 T256 C256 L4 H4 F1024 V4096"},
      {"openblas_library", loaded_openblas()},
      {"openblas_parallel", parallel_name(openblas_get_parallel())},
      {"openblas_config", openblas_get_config()},
      {"openblas_corename", openblas_get_corename()},
      {"blas", asteria::blas_report()},
      {"gemm", asteria::gemm_report()},
      {"gemm_setting", gemm},
      {"openblas_threads", openblas_get_num_threads()},
      {"omp_max_threads", omp_get_max_threads()},
      {"OMP_NUM_THREADS", omp_env ? omp_env : "(unset)"},
      {"OPENBLAS_CORETYPE", ct ? ct : "(unset)"},
      {"OPENBLAS_L2_SIZE", l2 ? l2 : "(unset)"},
      {"min_time_s", min_time},
      {"repeats", repeats},
      {"shapes", shapes},
      {"attention_batch_modes", attention_modes},
      {"step_gemm_flops", total_flops},
      {"step_gemm_seconds", total_seconds},
      {"weighted_gflops", total_flops / total_seconds * 1e-9},
      {"weighted_gflops_linear_only", lin_flops / lin_seconds * 1e-9},
      {"weighted_gflops_best_samples", total_flops / best_total * 1e-9},
      {"weighting", "sum(step FLOPs) / sum(step FLOPs / rate); attention counted dense (T x T)"}};
  std::cout << j.dump() << std::endl;
  return 0;
}
