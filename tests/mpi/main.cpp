// GoogleTest under mpirun: MPI is initialized for the whole binary (as asteria-train does), and
// every rank runs every test in the same order, since the tests call collectives.
#include <gtest/gtest.h>

#include "fsdp/mpi_communicator.hpp"

int main(int argc, char** argv) {
  asteria::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
