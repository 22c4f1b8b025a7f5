#include "train/replica_check.hpp"

#include <xxhash.h>

#include <algorithm>

#include "core/error.hpp"

namespace asteria {

void check_replicas_identical(Communicator& comm, int part, const std::vector<TensorBits>& tensors,
                              const std::string& when) {
  const int W = comm.size(), me = comm.rank();
  if (W == 1) return;
  // 1. Every rank's part and number of tensors (each rank fills in its own slots of a sum).
  std::vector<double> shape(2 * static_cast<size_t>(W), 0.0);
  shape[2 * me] = part;
  shape[2 * me + 1] = static_cast<double>(tensors.size());
  Request r = comm.all_reduce(shape.data(), shape.size(), "the replicas' check at " + when);
  comm.wait(r);
  size_t n = 0;
  for (int q = 0; q < W; ++q) n = std::max(n, static_cast<size_t>(shape[2 * q + 1]));
  // 2. Every rank's hashes, 52 bits of each (exact in a double).
  std::vector<double> hashes(static_cast<size_t>(W) * n, 0.0);
  for (size_t i = 0; i < tensors.size(); ++i)
    hashes[me * n + i] = static_cast<double>(XXH3_64bits(tensors[i].data, tensors[i].count * sizeof(float)) >> 12);
  r = comm.all_reduce(hashes.data(), hashes.size(), "the replicas' checksums at " + when);
  comm.wait(r);
  for (int a = 1; a < W; ++a)
    for (int q = 0; q < a; ++q) {
      if (shape[2 * q] != shape[2 * a]) continue;
      // q is the first rank holding a's part; a rank that differs names the first tensor.
      for (size_t i = 0; i < n; ++i)
        if (hashes[a * n + i] != hashes[q * n + i])
          fail("rank ", a, "'s parameters differ from rank ", q, "'s at ", when, ", first in ",
               shape[2 * me] == shape[2 * a] ? tensors.at(i).name : "tensor #" + std::to_string(i) + " of their part",
               ": the replicas diverged (a non-deterministic computation on one of them?)");
      break;
    }
}

std::vector<TensorBits> owned_tensors(const std::vector<ParamTable>& tables, const std::function<const float*(int)>& params) {
  std::vector<TensorBits> tensors;
  for (int l = 0; l < static_cast<int>(tables.size()); ++l) {
    const float* p = params(l);
    for (const ParamEntry& e : tables[l].entries) {
      std::string name = e.name;
      if (e.tensor_rows > 0)
        name += " (rows " + std::to_string(e.row_offset) + "-" + std::to_string(e.row_offset + e.shape[0] - 1) + ")";
      tensors.push_back({std::move(name), p + e.offset, e.numel});
    }
  }
  return tensors;
}

}  // namespace asteria
