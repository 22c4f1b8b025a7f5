// bench_refresh: the cost of one preconditioner refresh in float64 vs float32 (optim.refresh_dtype)
// on one thread, at block sizes n (default 256, 768, 1024):
//   qr_refresh          SOAP / KL-Shampoo: L Q, re-sort, sgeqrf/dgeqrf + sorgqr/dorgqr
//   inverse_root_eigh   Shampoo: ssyevd/dsyevd, then V diag(mu^-1/4) V^T
// Both are called through the matfn Precision overloads on fp64 data, as the optimizer calls
// them, so float32 includes rounding the inputs to fp32 and widening the result (O(n^2)).
// Inputs: L = G G^T / 2n with G n x 2n standard normal (eigenvalues in about [0.09, 2.9]), Q an
// orthonormal basis (one refresh from the identity), root_eps 1e-12, p = 4.
// Cases run round-robin, `repeats` rounds (a shared machine's load then spreads over all cases);
// each sample is one call. Prints per case the median and best milliseconds and the float64 / float32
// ratio of the medians (> 1: float32 faster), measured in the same run, and the largest
// difference of the float32 result from the float64 one (relative to the largest entry; for
// qr_refresh from an extra untimed call without re-sorting, as eigenvalue estimates closer than
// fp32 roundoff may sort differently, an equally valid basis: the count of columns the timed
// float32 call placed differently from float64 is printed beside it).
//
// Then the parts the compute lane places (matfn::qr_refresh_part, inverse_root_eigh_part): each
// part's median milliseconds and its share of the refresh, beside the shares the placement
// assumes (refresh_part_costs).
//
// Usage: bench_refresh [--repeats N] [--sizes 256,768,1024]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu/blas_kernels.hpp"
#include "optim/matrix_functions.hpp"
#include "optim/preconditioner.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace matfn = asteria::matfn;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    s = std::max(s, std::abs(b[i]));
  }
  return d / s;
}

struct Case {
  std::string name;
  int n;
  matfn::Precision precision;
  std::function<void()> prepare;   // untimed (restores the inputs)
  std::function<void()> run;       // timed
  std::vector<double> samples;
};

}  // namespace

int main(int argc, char** argv) {
  // The right BLAS kernels for this CPU, before any BLAS call (core/cpu/blas_kernels.hpp).
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  int repeats = 7;
  std::vector<int> sizes = {256, 768, 1024};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) sizes.push_back(std::stoi(t));
    } else {
      std::fprintf(stderr, "usage: bench_refresh [--repeats N] [--sizes 256,768,1024]\n");
      return 2;
    }
  }
  omp_set_num_threads(1);
  openblas_set_num_threads(1);

  struct Data {
    int n;
    std::vector<double> L, Q0, Q, root;
    std::vector<int> perm;
    matfn::Workspace ws;
    std::vector<double> root_out[2];   // [Float64, Float32] results, for the accuracy columns
    std::vector<int> perm_out[2];
  };
  std::vector<std::unique_ptr<Data>> data;
  std::vector<Case> cases;
  std::mt19937 rng(1);
  std::normal_distribution<double> nd;
  for (int n : sizes) {
    auto d = std::make_unique<Data>();
    d->n = n;
    const int k = 2 * n;
    std::vector<double> g(static_cast<size_t>(n) * k);
    for (auto& x : g) x = nd(rng);
    d->L.assign(static_cast<size_t>(n) * n, 0.0);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, n, k, 1.0 / k, g.data(), k, 0.0, d->L.data(), n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < i; ++j) d->L[i * n + j] = d->L[j * n + i];
    d->Q0.assign(static_cast<size_t>(n) * n, 0.0);
    for (int i = 0; i < n; ++i) d->Q0[i * n + i] = 1.0;
    if (matfn::qr_refresh(matfn::Precision::Float64, n, d->L.data(), d->Q0.data(), d->perm, d->ws) != matfn::Status::Ok) {
      std::fprintf(stderr, "initial qr_refresh failed at n = %d\n", n);
      return 1;
    }
    d->Q = d->Q0;
    d->root.resize(static_cast<size_t>(n) * n);
    Data* p = d.get();
    for (auto prec : {matfn::Precision::Float64, matfn::Precision::Float32}) {
      const int slot = prec == matfn::Precision::Float64 ? 0 : 1;
      cases.push_back({"qr_refresh", n, prec, [p] { p->Q = p->Q0; },
                       [p, prec, slot] {
                         if (matfn::qr_refresh(prec, p->n, p->L.data(), p->Q.data(), p->perm, p->ws) != matfn::Status::Ok)
                           std::abort();
                         p->perm_out[slot] = p->perm;
                       },
                       {}});
      cases.push_back({"inverse_root_eigh", n, prec, [] {},
                       [p, prec, slot] {
                         if (matfn::inverse_root_eigh(prec, p->n, p->L.data(), 4.0, 1e-12, p->root.data(), p->ws) !=
                             matfn::Status::Ok)
                           std::abort();
                         p->root_out[slot] = p->root;
                       },
                       {}});
    }
    data.push_back(std::move(d));
  }
  // One untimed call of each case sizes the workspaces and warms the caches.
  for (Case& c : cases) {
    c.prepare();
    c.run();
  }
  for (int r = 0; r < repeats; ++r)
    for (Case& c : cases) {
      c.prepare();
      const auto t0 = Clock::now();
      c.run();
      c.samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }

  // Accuracy of qr_refresh in a fixed column order (untimed).
  std::vector<double> qr_diff(data.size());
  for (size_t i = 0; i < data.size(); ++i) {
    Data& d = *data[i];
    std::vector<double> q[2] = {d.Q0, d.Q0};
    for (int slot = 0; slot < 2; ++slot)
      if (matfn::qr_refresh(slot ? matfn::Precision::Float32 : matfn::Precision::Float64, d.n, d.L.data(),
                            q[slot].data(), d.perm, d.ws, /*sort=*/false) != matfn::Status::Ok)
        std::abort();
    qr_diff[i] = max_rel_diff(q[1], q[0]);
  }

  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  const char* l2 = std::getenv("OPENBLAS_L2_SIZE");
  std::printf("bench_refresh: one refresh, float64 vs float32, one thread (omp %d, openblas %d, core %s, "
              "OPENBLAS_CORETYPE=%s, OPENBLAS_L2_SIZE=%s), %d samples per case, round-robin\n",
              omp_get_max_threads(), openblas_get_num_threads(), openblas_get_corename(), ct ? ct : "(unset)",
              l2 ? l2 : "(unset)", repeats);
  std::printf("%-18s %5s  %13s %11s  %13s %11s  %14s  %13s  %s\n", "function", "n", "f64 median ms",
              "f64 best ms", "f32 median ms", "f32 best ms", "f64/f32 median", "f32 rel diff", "columns sorted differently");
  for (size_t i = 0; i < data.size(); ++i)
    for (size_t j = 4 * i; j < 4 * i + 2; ++j) {
      const Case& c64 = cases[j];
      const Case& c32 = cases[j + 2];
      const Data& d = *data[i];
      const bool qr = c64.name == "qr_refresh";
      int moved = 0;
      for (int k = 0; k < d.n; ++k) moved += d.perm_out[0][k] != d.perm_out[1][k];
      const double m64 = median(c64.samples), m32 = median(c32.samples);
      std::printf("%-18s %5d  %13.2f %11.2f  %13.2f %11.2f  %14.2f  %13.2e  %s\n", c64.name.c_str(), c64.n, 1e3 * m64,
                  1e3 * *std::min_element(c64.samples.begin(), c64.samples.end()), 1e3 * m32,
                  1e3 * *std::min_element(c32.samples.begin(), c32.samples.end()), m64 / m32,
                  qr ? qr_diff[i] : max_rel_diff(d.root_out[1], d.root_out[0]),
                  qr ? std::to_string(moved).c_str() : "-");
    }

  // The parts, timed one by one (round-robin over the repeats like the cases above).
  std::printf("\nparts (median ms; share of the refresh, measured / assumed by refresh_part_costs)\n");
  for (const auto& d : data)
    for (auto prec : {matfn::Precision::Float64, matfn::Precision::Float32}) {
      const char* dtype = prec == matfn::Precision::Float64 ? "f64" : "f32";
      std::vector<std::vector<double>> qr(matfn::kQrRefreshParts), root(matfn::kInverseRootEighParts);
      matfn::PartCarry carry;
      for (int r = 0; r <= repeats; ++r) {   // round 0 warms up
        d->Q = d->Q0;
        for (int k = 0; k < matfn::kQrRefreshParts; ++k) {
          const auto t0 = Clock::now();
          if (matfn::qr_refresh_part(k, prec, d->n, d->L.data(), d->Q.data(), d->perm, carry, d->ws) != matfn::Status::Ok)
            std::abort();
          if (r > 0) qr[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        for (int k = 0; k < matfn::kInverseRootEighParts; ++k) {
          const auto t0 = Clock::now();
          if (matfn::inverse_root_eigh_part(k, prec, d->n, d->L.data(), 4.0, 1e-12, d->root.data(), carry, d->ws) !=
              matfn::Status::Ok)
            std::abort();
          if (r > 0) root[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
      }
      // refresh_part_costs lists the left factor's parts first: a square block's first half.
      for (const auto& [name, parts, algo] : {std::tuple{"qr_refresh", &qr, asteria::OptimizerKind::Soap},
                                                std::tuple{"inverse_root", &root, asteria::OptimizerKind::Shampoo}}) {
        const std::vector<double> assumed = asteria::refresh_part_costs(algo, d->n, d->n);
        double total = 0, assumed_total = 0;
        for (size_t k = 0; k < parts->size(); ++k) total += median((*parts)[k]), assumed_total += assumed[k];
        std::printf("%-13s %5d %s:", name, d->n, dtype);
        for (size_t k = 0; k < parts->size(); ++k)
          std::printf("  part %zu %8.2f ms %.2f / %.2f", k, 1e3 * median((*parts)[k]), median((*parts)[k]) / total,
                      assumed[k] / assumed_total);
        std::printf("\n");
      }
    }
  return 0;
}
