#pragma once
// Work of a block step that other threads may take: run_beside(backend, main, aside...) runs each
// `aside` as an OpenMP task and `main` on the calling thread, and returns when all are done.
//
// Why: the second-order optimizer steps a layer's blocks in parallel, one block per thread
// (second_order.cpp), and a layer's blocks differ in size (bench-small's: one 256 x 256, one
// 768 x 256 and three 1024 x 256 per layer), so on two threads one done with its blocks waited at
// the loop's end for a quarter of the layer's step. The factor statistics (L += G G^T, R += G^T G)
// read only G and write only their factor: as tasks, a thread waiting at the loop's barrier takes
// them. Each piece runs on one thread wherever it runs (BLAS inside a parallel region is
// single-threaded), so the bits are the same as calling them in turn.
//
// Contract: the pieces touch disjoint memory, use no per-thread scratch, and do not throw. On a
// device backend (its work goes to the calling thread's stream) they run in turn on the calling
// thread, main first.
#include <omp.h>

#include "optim/block_backend.hpp"

namespace asteria {

template <class Main, class... Aside>
void run_beside(const BlockBackend& backend, Main&& main, Aside&&... aside) {
  if (backend.on_device() || !omp_in_parallel()) {   // no team to share with: in turn, as before
    main();
    (aside(), ...);
    return;
  }
  // A task gets a copy of the pointer (firstprivate); a reference would copy the callable.
  const auto spawn = [](auto* piece) {
#pragma omp task firstprivate(piece)
    (*piece)();
  };
  (spawn(&aside), ...);
  main();
#pragma omp taskwait
}

}  // namespace asteria
