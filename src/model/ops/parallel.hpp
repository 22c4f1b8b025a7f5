#pragma once
// When an op's loop is worth splitting over threads. A parallel region costs microseconds to
// open and, on a machine shared with other processes, a thread that is not scheduled can hold
// the barrier for a whole time slice; below ~32K elements of work the op runs on one thread.
#include <cstddef>

namespace asteria::ops {

constexpr size_t kMinParallelWork = size_t(1) << 15;

inline bool worth_parallel(size_t work) { return work >= kMinParallelWork; }

}  // namespace asteria::ops
