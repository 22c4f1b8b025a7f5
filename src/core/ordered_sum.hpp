#pragma once
// Sums over a range split across OpenMP threads whose bits depend on the range only, not on the
// number of threads or their timing: the range is cut into a fixed number of chunks (a function
// of n), each chunk is summed in order by one thread, then the chunks' sums in chunk order.
// OpenMP's reduction clause instead adds the threads' partial sums in the order the threads
// finish: with three or more threads the result changes from run to run, so replicas that
// compute the same norm from the same gradient would step differently and diverge.
#include <algorithm>
#include <array>
#include <cstddef>

namespace asteria {

// K sums at once over [0, n): partial(begin, end) returns the K sums of [begin, end). Chunks of
// at least min_chunk elements, at most kMaxChunks of them; `parallel` false runs them on the
// calling thread, with the same bits.
inline constexpr size_t kMaxChunks = 256;

template <size_t K, class Partial>
std::array<double, K> ordered_sums(size_t n, size_t min_chunk, bool parallel, Partial&& partial) {
  const size_t chunks = std::clamp<size_t>((n + min_chunk - 1) / std::max<size_t>(min_chunk, 1), 1, kMaxChunks);
  std::array<std::array<double, K>, kMaxChunks> parts;
#pragma omp parallel for schedule(static) if (parallel && chunks > 1)
  for (size_t c = 0; c < chunks; ++c) parts[c] = partial(n * c / chunks, n * (c + 1) / chunks);
  std::array<double, K> total{};
  for (size_t c = 0; c < chunks; ++c)
    for (size_t k = 0; k < K; ++k) total[k] += parts[c][k];
  return total;
}

}  // namespace asteria
