#include "model/init.hpp"

#include <cmath>

namespace asteria {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: 53 random bits, never 0 so that log() is finite.
double uniform_open0(uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

bool ends_with(const std::string& s, const char* suffix) {
  const std::string suf(suffix);
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

}  // namespace

uint64_t name_stream(const std::string& name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

double init_std_for(const ModelConfig& cfg, const ParamEntry& entry, int block) {
  if (entry.cls == ParamClass::Norm) return 0.0;
  if (cfg.init == InitKind::Normal) return cfg.init_std;
  const double C = cfg.d_model, F = cfg.mlp_hidden, depth = block + 1;
  if (ends_with(entry.name, "att_out")) return 1.0 / std::sqrt(2.0 * C * depth);
  if (ends_with(entry.name, "mlp_down")) return 1.0 / std::sqrt(2.0 * F * depth);
  // wte, lm_head, att_qkv, mlp_up: fan_in is the column count (C for all of them).
  return 1.0 / std::sqrt(static_cast<double>(entry.shape.back()));
}

template <class T>
void fill_truncated_normal(T* x, size_t n, double std, uint64_t seed, uint64_t stream) {
  uint64_t key_state = seed ^ 0x5851F42D4C957F2Dull;
  const uint64_t key = splitmix64(key_state) ^ stream;
  constexpr double kTwoPi = 6.283185307179586476925;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    // Each element has its own generator state: key mixed with the index.
    uint64_t state = key + i * 0xD1B54A32D192ED03ull;
    splitmix64(state);
    double z;
    do {
      const double u1 = uniform_open0(state), u2 = uniform_open0(state);
      z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
    } while (std::fabs(z) > 3.0);
    x[i] = static_cast<T>(std * z);
  }
}

template void fill_truncated_normal<float>(float*, size_t, double, uint64_t, uint64_t);
template void fill_truncated_normal<double>(double*, size_t, double, uint64_t, uint64_t);

}  // namespace asteria
