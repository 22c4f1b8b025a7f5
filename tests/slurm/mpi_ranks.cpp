// A tiny MPI program for the local Slurm test (tests/slurm/local_slurm_test.sh): every rank
// prints its rank, the world size and its host, then the ranks Allreduce (rank + 1) and check
// the sum against size * (size + 1) / 2. Exit code 0 only when the sum is right on every rank.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  const long expected = static_cast<long>(size) * (size + 1) / 2;
  const bool ok = sum == expected;
  std::printf("mpi_ranks: rank %d size %d host %s sum %ld expected %ld %s\n", rank, size, host, sum,
              expected, ok ? "OK" : "WRONG");
  std::fflush(stdout);
  int all_ok = 0, my_ok = ok ? 1 : 0;
  MPI_Allreduce(&my_ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
