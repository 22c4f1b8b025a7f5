// The main of the GoogleTest binaries: the right BLAS kernels first, as every Asteria binary
// does (core/cpu/blas_kernels.hpp), then the tests.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/cpu/blas_kernels.hpp"

int main(int argc, char** argv) {
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
