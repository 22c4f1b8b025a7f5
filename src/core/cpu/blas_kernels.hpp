#pragma once
// Which OpenBLAS kernels this process runs, and the fix for a BLAS that fell back to generic ones
// (docs/DESIGN.md "Backends").
//
// Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernels when the library loads, from a table of CPU
// models; a model newer than the table (an Intel Xeon of family 6 model 207, say) falls back to
// the Prescott kernels (SSE3), several times slower at GEMM on a CPU with AVX-512. The choice can
// only be changed before the library loads, through OPENBLAS_CORETYPE, so the fix is a re-exec:
//
//   ensure_blas_kernels(argv, enabled)   at the top of main, before MPI_Init and any BLAS call:
//     1. reads the chosen kernels (openblas_get_corename) and the CPU's features (CPUID);
//     2. choose_blas_kernels decides: keep them, or switch to the best set the CPU supports when
//        the BLAS chose a lesser one, OPENBLAS_CORETYPE is unset (a value set by the user or the
//        system is never overridden: some set it because a kernel is wrong on their CPU) and the
//        switch is enabled (runtime.blas: auto; as-is turns it off, as does ASTERIA_BLAS=as-is);
//     3. before trusting the new set, runs a self-check in a child process under it (sgemm,
//        dgemm, dsyevd and dgeqrf on fixed inputs, compared with this process's results on the
//        fallback kernels); a wrong result or a crash keeps the fallback. The verdict is cached
//        per CPU model, library build and kernel set ($XDG_CACHE_HOME or ~/.cache,
//        asteria/blas-kernels), so the check runs once per machine;
//     4. re-executes the process (/proc/self/exe, the same arguments and environment plus
//        OPENBLAS_CORETYPE), once: the new process sees the variable set and keeps its kernels.
//   Returns the startup line to print (what happened, or that the kernels in use were kept
//   although the CPU supports better ones), or "" when they were kept and are right. Under
//   mpirun and srun every rank does this for itself before MPI starts (exec keeps the pid); the
//   first rank prints the line.
// Test hooks: ASTERIA_BLAS_TEST_CHOSEN=<set> stands for the library's choice (to run the switch
// on a CPU the library knows); ASTERIA_BLAS_TEST_BREAK makes the self-check's results wrong.
#include <string>

#include <nlohmann/json.hpp>

namespace asteria {

struct CpuFeatures {
  std::string vendor;       // "intel", "amd" or "other"
  std::string model_name;   // the brand string, e.g. "Intel(R) Xeon(R) Platinum 8581C"
  int family = 0, model = 0, stepping = 0;
  bool avx2 = false, fma = false;
  bool avx512 = false;      // F, CD, BW, DQ and VL: what OpenBLAS's SkylakeX kernels use
  bool avx512_bf16 = false;
};

// The CPU this process runs on (CPUID, and XGETBV for the OS's support of the AVX registers).
CpuFeatures detect_cpu();
// Its features as a short list, e.g. "avx2 fma avx512 avx512_bf16".
std::string feature_list(const CpuFeatures& cpu);

// The best OpenBLAS 0.3.21 kernel set for the CPU: Cooperlake (AVX-512 BF16), SkylakeX
// (AVX-512), Haswell (Intel AVX2 + FMA) or Zen (AMD AVX2 + FMA); "" when none of these applies.
std::string best_blas_core(const CpuFeatures& cpu);
// How capable a kernel set is: 1 the SSE generations (Prescott, Core2, Nehalem, Atom, ...),
// 2 Sandybridge and the AMD pre-Zen AVX ones, 3 Haswell / Zen, 4 SkylakeX, 5 Cooperlake and
// later; 0 unknown.
int blas_core_rank(const std::string& core);

struct BlasChoice {
  bool switch_core = false;
  std::string core;     // the set to switch to
  std::string reason;   // why (for the startup line, or why not)
  // Not switching although the CPU supports a better set than the one in use (OPENBLAS_CORETYPE
  // set, or runtime.blas as-is): that set, which the startup line names; else "".
  std::string better_unused;
};
// Pure: what to do. chosen: openblas_get_corename(); coretype_env: OPENBLAS_CORETYPE, null when
// unset (set, even empty, means chosen by someone); enabled: runtime.blas auto.
BlasChoice choose_blas_kernels(const CpuFeatures& cpu, const std::string& chosen, const char* coretype_env,
                               bool enabled);

std::string ensure_blas_kernels(char** argv, bool enabled);

// The CPU and the kernels in use, for --dry-run, run_info.json and the benchmarks.
nlohmann::json blas_report();

}  // namespace asteria
