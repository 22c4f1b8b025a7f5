#pragma once
// Which library runs each fp32 GEMM of the CPU backend (runtime.gemm; docs/DESIGN.md "Backends").
//
// OpenBLAS picks its kernels from a table of CPU models, and where the system holds it to a
// lesser set (OPENBLAS_CORETYPE=Haswell on Zen 5, whose AVX-512 kernels this release gets wrong)
// or the table does not know the CPU, it runs at a fraction of the machine's width. oneDNN
// compiles its kernels at run time for the ISA the CPU reports, whatever its vendor and model.
// The rule (route_sgemm, pure) was chosen from bench/gemm_engines.sh's figures at the model's and
// the optimizers' shapes:
//   - OpenBLAS for everything where oneDNN has no AVX2 kernels (a CPU without AVX2 + FMA), where
//     oneDNN failed its self-check, or with runtime.gemm openblas;
//   - oneDNN for everything where it runs AVX-512 kernels (it was as fast or faster at every shape);
//   - on AVX2, oneDNN except products with op(A) transposed over a long reduction (K >= 1024:
//     the weight gradients dW = dY^T X), where oneDNN 2.6's AVX2 kernels ran at about half of
//     OpenBLAS's.
// LAPACK and every double GEMM stay OpenBLAS's.
#include <string>

#include <nlohmann/json.hpp>

namespace asteria {

enum class GemmChoice { Auto, OpenBlas, OneDnn };     // runtime.gemm
enum class GemmLibrary { OpenBlas, OneDnn };

// oneDNN's kernels on this CPU, from dnnl_get_effective_cpu_isa: what the rule reads.
enum class OneDnnIsa { None, Avx2, Avx512, Avx512Bf16 };

struct GemmRouting {
  GemmChoice choice = GemmChoice::Auto;
  OneDnnIsa isa = OneDnnIsa::None;
  bool onednn_checked = true;   // oneDNN's sgemm passed the self-check (auto only runs it)
};

// Pure: which library runs op(A)[M x K] * op(B)[K x N] under the routing.
GemmLibrary route_sgemm(const GemmRouting& r, bool trans_a, int K);

// Whether bf16 GEMMs run on oneDNN's bf16 kernels (AVX512-BF16 or AMX; not with runtime.gemm
// openblas, nor when oneDNN failed its self-check).
bool runs_bf16_kernels(const GemmRouting& r);

// The routing a choice gives on this machine: oneDNN's ISA, and for auto the self-check, run once
// per process (fp32 products of odd shapes in every transpose against fp64, a few milliseconds):
// a wrong oneDNN result sends every GEMM to OpenBLAS and gemm_report says why.
GemmRouting routing_for(GemmChoice choice);

// The process's routing: runtime.gemm's default, auto, until set_gemm_choice, which a run calls
// once it knows its config, before its compute threads start.
void set_gemm_choice(GemmChoice choice);
GemmRouting gemm_routing();

const char* to_string(GemmChoice c);
const char* to_string(OneDnnIsa isa);

// A routing as run_info.json, --dry-run and the benchmarks print it: the choice, oneDNN's
// version and ISA, whether bf16 GEMMs run in bf16, and the self-check's verdict.
nlohmann::json gemm_report(const GemmRouting& r = gemm_routing());

}  // namespace asteria
