// GoogleTest under mpirun: MPI is initialized for the whole binary (as asteria-train does), and
// every rank runs every test in the same order, since the tests call collectives.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/cpu/blas_kernels.hpp"
#include "comm/mpi_communicator.hpp"

int main(int argc, char** argv) {
  // The right BLAS kernels before MPI starts (core/cpu/blas_kernels.hpp).
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  asteria::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
