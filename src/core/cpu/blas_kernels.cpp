#include "core/cpu/blas_kernels.hpp"

#include <cblas.h>
#include <cpuid.h>
#include <lapacke.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

namespace asteria {

namespace {

constexpr const char* kSelfCheckVar = "ASTERIA_BLAS_SELF_CHECK";   // set in the self-check's child
constexpr const char* kSwitchedVar = "ASTERIA_BLAS_SWITCHED";      // set across the re-exec: the line to print
constexpr const char* kTestChosenVar = "ASTERIA_BLAS_TEST_CHOSEN";  // tests: pretend the BLAS chose this set
constexpr double kSelfCheckTimeoutS = 60;

bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

// The OS saves the registers of these state components (XGETBV of XCR0).
bool os_saves(unsigned mask) {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & mask) == mask;
}

// The set OpenBLAS runs now: openblas_get_corename(), or the tests' stand-in.
std::string chosen_core() {
  if (const char* t = std::getenv(kTestChosenVar); t && *t && !std::getenv("OPENBLAS_CORETYPE")) return t;
  return openblas_get_corename();
}

// Products, eigenvalues and norms of small fixed problems, on whatever kernels this process runs.
std::vector<double> self_check_values() {
  std::vector<double> out;
  const auto value = [](int i, int j, double s) { return std::sin(0.37 * i + 0.11 * j + s) + 0.01 * ((i * 7 + j * 3) % 5); };
  // GEMMs with odd edges (67 x 45, inner 53) and a size that takes the blocked path (256^3), plain
  // and with a transposed operand, in fp32 and fp64.
  for (const auto [m, p, k] : {std::array<int, 3>{67, 45, 53}, std::array<int, 3>{256, 256, 256}}) {
    std::vector<double> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * p), c(static_cast<size_t>(m) * p);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < k; ++j) a[i * k + j] = value(i, j, 0.5);
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < p; ++j) b[i * p + j] = value(i, j, 1.5);
    const std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
    std::vector<float> cf(c.size());
    for (const bool trans : {false, true}) {
      // trans: B read as the transpose of a p x k matrix (the same numbers, laid out as B^T).
      std::vector<double> bt(b.size());
      for (int i = 0; i < k; ++i)
        for (int j = 0; j < p; ++j) bt[j * k + i] = b[i * p + j];
      const std::vector<float> btf(bt.begin(), bt.end());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, trans ? CblasTrans : CblasNoTrans, m, p, k, 1.0f, af.data(), k,
                  trans ? btf.data() : bf.data(), trans ? k : p, 0.0f, cf.data(), p);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, trans ? CblasTrans : CblasNoTrans, m, p, k, 1.0, a.data(), k,
                  trans ? bt.data() : b.data(), trans ? k : p, 0.0, c.data(), p);
      out.insert(out.end(), cf.begin(), cf.end());
      out.insert(out.end(), c.begin(), c.end());
    }
  }
  // dsyevd: a symmetric 64 x 64 (its eigenvalues; the vectors are defined up to sign).
  const int n = 64;
  std::vector<double> s(static_cast<size_t>(n) * n), w(n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) s[i * n + j] = s[j * n + i] = value(i, j, 2.5) + (i == j ? 3.0 : 0.0);
  if (LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', n, s.data(), n, w.data()) != 0) w.assign(n, NAN);
  out.insert(out.end(), w.begin(), w.end());
  // dgeqrf: an 80 x 50 (|R_ii|, defined up to sign).
  const int rows = 80, cols = 50;
  std::vector<double> q(static_cast<size_t>(rows) * cols), tau(cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) q[i * cols + j] = value(i, j, 3.5);
  if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, rows, cols, q.data(), cols, tau.data()) != 0) q.assign(q.size(), NAN);
  for (int j = 0; j < cols; ++j) out.push_back(std::fabs(q[j * cols + j]));
  return out;
}

// Whether two runs of self_check_values agree within what different kernels may round to:
// each value within 1e-4 of the largest magnitude (fp32 sums of up to 256 products differ by
// ~1e-6 of it; a wrong kernel by far more).
bool agree(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  double scale = 0;
  for (double x : a) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= 1e-4 * scale)) return false;
  return true;
}

// Runs this program's self-check under `core` in a child process; "" when it agrees with ours,
// else what went wrong.
std::string self_check(const std::string& core, char** argv) {
  int fds[2];
  if (pipe(fds) != 0) return "no pipe for the self-check";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<std::string> env_text = {"OPENBLAS_CORETYPE=" + core, std::string(kSelfCheckVar) + "=1"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OPENBLAS_CORETYPE=", 18) != 0 && std::strncmp(*e, kSelfCheckVar, std::strlen(kSelfCheckVar)) != 0)
      env_text.push_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return std::string("could not start it: ") + std::strerror(rc);
  }
  std::string text;
  char buf[4096];
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    const double left = kSelfCheckTimeoutS - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left <= 0 || poll(&p, 1, static_cast<int>(left * 1000)) <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) return std::string("it ended on signal ") + std::to_string(WTERMSIG(status));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return "it exited with code " + std::to_string(WEXITSTATUS(status));
  std::vector<double> theirs;
  std::istringstream in(text);
  for (double x; in >> x;) theirs.push_back(x);
  if (!agree(self_check_values(), theirs)) return "its results differ from the fallback kernels'";
  return "";
}

std::filesystem::path cache_file() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg && *xdg) return std::filesystem::path(xdg) / "asteria" / "blas-kernels";
  if (home && *home) return std::filesystem::path(home) / ".cache" / "asteria" / "blas-kernels";
  return {};
}

std::string cache_key(const CpuFeatures& cpu, const std::string& core) {
  std::ostringstream k;
  k << cpu.model_name << '|' << cpu.family << '.' << cpu.model << '.' << cpu.stepping << '|' << openblas_get_config() << '|'
    << core;
  return k.str();
}

// The cached verdict ("ok", or why not) for key, or "" when none.
std::string cached_verdict(const std::string& key) {
  const std::filesystem::path f = cache_file();
  if (f.empty()) return "";
  std::ifstream in(f);
  std::string verdict;
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos && line.compare(0, tab, key) == 0) verdict = line.substr(tab + 1);
  }
  return verdict;
}

void cache_verdict(const std::string& key, const std::string& verdict) {
  const std::filesystem::path f = cache_file();
  if (f.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(f.parent_path(), ec);
  // Appended in one write: ranks starting together may append the same verdict twice, harmlessly.
  const std::string line = key + "\t" + verdict + "\n";
  if (FILE* out = std::fopen(f.c_str(), "a")) {
    std::fwrite(line.data(), 1, line.size(), out);
    std::fclose(out);
  }
}

// Whether this process should print the startup line: the first rank of a launch, or no launch.
bool first_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return std::atoi(v) == 0;
  return true;
}

std::string describe(const CpuFeatures& cpu) {
  return (cpu.model_name.empty() ? cpu.vendor + " CPU" : cpu.model_name) + " (family " + std::to_string(cpu.family) +
         " model " + std::to_string(cpu.model) + ": " + feature_list(cpu) + ")";
}

}  // namespace

CpuFeatures detect_cpu() {
  CpuFeatures c;
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &cx, &d)) return c;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &cx, 4);
  c.vendor = std::strcmp(vendor, "GenuineIntel") == 0 ? "intel" : std::strcmp(vendor, "AuthenticAMD") == 0 ? "amd" : "other";
  const unsigned max_leaf = a;
  __get_cpuid(1, &a, &b, &cx, &d);
  const int base_family = (a >> 8) & 0xF, base_model = (a >> 4) & 0xF;
  c.stepping = a & 0xF;
  c.family = base_family == 0xF ? base_family + ((a >> 20) & 0xFF) : base_family;
  c.model = (base_family == 6 || base_family == 0xF) ? base_model + (((a >> 16) & 0xF) << 4) : base_model;
  const bool avx_os = bit(cx, 27) && bit(cx, 28) && os_saves(0x6);
  c.fma = avx_os && bit(cx, 12);
  if (max_leaf >= 7) {
    __get_cpuid_count(7, 0, &a, &b, &cx, &d);
    c.avx2 = avx_os && bit(b, 5);
    c.avx512 = avx_os && os_saves(0xE6) && bit(b, 16) && bit(b, 17) && bit(b, 28) && bit(b, 30) && bit(b, 31);
    __get_cpuid_count(7, 1, &a, &b, &cx, &d);
    c.avx512_bf16 = c.avx512 && bit(a, 5);
  }
  unsigned ext = 0;
  __get_cpuid(0x80000000, &ext, &b, &cx, &d);
  if (ext >= 0x80000004) {
    unsigned brand[12];
    for (unsigned i = 0; i < 3; ++i) __get_cpuid(0x80000002 + i, &brand[4 * i], &brand[4 * i + 1], &brand[4 * i + 2], &brand[4 * i + 3]);
    std::string name(reinterpret_cast<const char*>(brand), sizeof brand);
    name = name.substr(0, name.find('\0'));
    const size_t first = name.find_first_not_of(' '), last = name.find_last_not_of(' ');
    c.model_name = first == std::string::npos ? "" : name.substr(first, last - first + 1);
  }
  return c;
}

std::string feature_list(const CpuFeatures& cpu) {
  std::string s;
  for (auto [on, name] : {std::pair{cpu.avx2, "avx2"}, {cpu.fma, "fma"}, {cpu.avx512, "avx512"}, {cpu.avx512_bf16, "avx512_bf16"}})
    if (on) s += (s.empty() ? "" : " ") + std::string(name);
  return s.empty() ? "no avx2" : s;
}

std::string best_blas_core(const CpuFeatures& cpu) {
  if (cpu.vendor != "intel" && cpu.vendor != "amd") return "";
  if (cpu.avx512_bf16) return "Cooperlake";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2 && cpu.fma) return cpu.vendor == "amd" ? "Zen" : "Haswell";
  return "";
}

int blas_core_rank(const std::string& core) {
  std::string c = core;
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char x) { return std::tolower(x); });
  for (const char* s : {"katmai", "coppermine", "northwood", "prescott", "banias", "core2", "penryn", "dunnington",
                        "nehalem", "atom", "athlon", "opteron", "opteron_sse3", "barcelona", "bobcat"})
    if (c == s) return 1;
  for (const char* s : {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"})
    if (c == s) return 2;
  if (c == "haswell" || c == "zen") return 3;
  if (c == "skylakex") return 4;
  if (c == "cooperlake" || c == "sapphirerapids") return 5;
  return 0;
}

BlasChoice choose_blas_kernels(const CpuFeatures& cpu, const std::string& chosen, const char* coretype_env,
                               bool enabled) {
  BlasChoice c;
  const std::string best = best_blas_core(cpu);
  const int have = blas_core_rank(chosen), want = blas_core_rank(best);
  if (!enabled || coretype_env) {
    c.reason = !enabled ? "runtime.blas as-is" : "OPENBLAS_CORETYPE is set ('" + std::string(coretype_env) + "')";
    if (have > 0 && have < want) c.better_unused = best;
    return c;
  }
  if (best.empty()) return c.reason = "no better kernel set for this CPU", c;
  if (have == 0) return c.reason = "OpenBLAS chose '" + chosen + "', a set this check does not know", c;
  if (have >= want) return c.reason = "OpenBLAS chose " + chosen + ", right for this CPU", c;
  c.switch_core = true;
  c.core = best;
  c.reason = "OpenBLAS chose " + chosen + ", a fallback for this CPU";
  return c;
}

std::string ensure_blas_kernels(char** argv, bool enabled) {
  if (std::getenv(kSelfCheckVar)) {
    // The self-check's child: print the results on the kernels it was started with, and end.
    // (Tests: ASTERIA_BLAS_TEST_BREAK makes one result wrong, as a broken kernel would.)
    std::vector<double> values = self_check_values();
    if (std::getenv("ASTERIA_BLAS_TEST_BREAK")) values[values.size() / 2] += 1.0;
    for (double x : values) std::printf("%.17g\n", x);
    std::fflush(stdout);
    std::_Exit(0);
  }
  if (const char* switched = std::getenv(kSwitchedVar)) {
    std::string line = switched;
    unsetenv(kSwitchedVar);   // not for this process's children
    return first_rank() ? line : "";
  }
  if (const char* as_is = std::getenv("ASTERIA_BLAS"); as_is && std::string(as_is) == "as-is") enabled = false;
  const CpuFeatures cpu = detect_cpu();
  const std::string chosen = chosen_core();
  const BlasChoice choice = choose_blas_kernels(cpu, chosen, std::getenv("OPENBLAS_CORETYPE"), enabled);
  if (!choice.better_unused.empty())
    return first_rank() ? "asteria: BLAS kernels: " + choice.reason + ": keeping " + chosen + ", though this CPU " +
                              describe(cpu) + " supports the faster " + choice.better_unused + " kernels"
                        : "";
  if (!choice.switch_core) return "";
  const std::string key = cache_key(cpu, choice.core);
  std::string verdict = cached_verdict(key);
  if (verdict.empty()) {
    const std::string why = self_check(choice.core, argv);
    verdict = why.empty() ? "ok" : why;
    cache_verdict(key, verdict);
  }
  const std::string head = "asteria: BLAS kernels: " + choice.reason + " " + describe(cpu) + "; ";
  if (verdict != "ok")
    return first_rank() ? head + choice.core + " failed its self-check (" + verdict + "): keeping " + chosen : "";
  setenv("OPENBLAS_CORETYPE", choice.core.c_str(), 1);
  setenv(kSwitchedVar, (head + "running with OPENBLAS_CORETYPE=" + choice.core + " (self-checked; runtime.blas: as-is keeps " +
                        chosen + ")").c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv);
  // The exec failed: carry on with the kernels we have.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kSwitchedVar);
  return first_rank() ? head + "could not re-execute (" + std::strerror(errno) + "): keeping " + chosen : "";
}

nlohmann::json blas_report() {
  const CpuFeatures cpu = detect_cpu();
  const char* env = std::getenv("OPENBLAS_CORETYPE");
  return {{"cpu", cpu.model_name},
          {"cpu_vendor", cpu.vendor},
          {"cpu_family_model", std::to_string(cpu.family) + "/" + std::to_string(cpu.model)},
          {"cpu_features", feature_list(cpu)},
          {"cpu_best_kernels", best_blas_core(cpu)},
          {"openblas_corename", openblas_get_corename()},
          {"openblas_coretype_env", env ? env : "(unset)"},
          {"openblas_config", openblas_get_config()}};
}

}  // namespace asteria
