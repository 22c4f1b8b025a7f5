#include "train/run_settings.hpp"

#include <omp.h>
#include <cblas.h>

namespace asteria {

namespace {
// The process's thread counts before any run changed them, taken at load time.
const int kDefaultOmpThreads = omp_get_max_threads();
const int kDefaultBlasThreads = openblas_get_num_threads();
}  // namespace

TokenDtype data_dtype(const Config& cfg) {
  if (cfg.data.dtype == TokenDtypeChoice::U16) return TokenDtype::U16;
  if (cfg.data.dtype == TokenDtypeChoice::U32) return TokenDtype::U32;
  return token_dtype_for_vocab(cfg.model.vocab_size);
}

ShadowDelay shadow_delay(const Config& cfg) {
  const ShadowConfig& c = cfg.runtime.shadow;
  return ShadowDelay{c.delay, c.sync_steps >= 0 ? c.sync_steps : cfg.train.warmup_steps};
}

int compute_threads(const Config& cfg) { return cfg.runtime.threads > 0 ? cfg.runtime.threads : kDefaultOmpThreads; }

void set_compute_threads(int threads) {
  omp_set_num_threads(threads > 0 ? threads : kDefaultOmpThreads);
  openblas_set_num_threads(threads > 0 ? threads : kDefaultBlasThreads);
}

ShadowLane shadow_lane(const Config& cfg) {
  const ShadowLane lane = cfg.runtime.shadow.lane;
  if (lane != ShadowLane::Auto) return lane;
  return compute_threads(cfg) + cfg.runtime.shadow.threads <= omp_get_num_procs() ? ShadowLane::Workers : ShadowLane::Compute;
}

}  // namespace asteria
