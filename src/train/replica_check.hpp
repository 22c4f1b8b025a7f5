#pragma once
// Whether the ranks that hold the same part of the model hold the same bits (the replicas of a
// replicated or hybrid run; distributed.check_every). Each rank hashes each of its tensors
// (XXH3-64 of the bytes); the ranks exchange their part and hashes (two small all-reduces over
// `comm`, every rank calls it) and compare each rank with the first rank holding its part. A
// difference is an Error on every rank naming the ranks, `when` and the first tensor (in table
// order) that differs, so a divergence is caught within check_every steps and traced to its
// tensor. Cost: one pass over the parameters at memory speed (about 1 ms per 10 MB).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "model/param_table.hpp"

namespace asteria {

struct TensorBits {
  std::string name;       // as messages show it, e.g. "blocks.1.att_qkv" or with its rows
  const float* data = nullptr;
  size_t count = 0;
};

// part: which part of the model this rank holds (its rank in the shard group; 0 unsharded).
void check_replicas_identical(Communicator& comm, int part, const std::vector<TensorBits>& tensors,
                              const std::string& when);

// The tensors of this rank's part of every layer (`tables`: its owned tables), named as messages
// show them (with their rows when a tensor is split), at params(l) + each entry's offset.
std::vector<TensorBits> owned_tensors(const std::vector<ParamTable>& tables, const std::function<const float*(int)>& params);

}  // namespace asteria
