#pragma once
// Which GPU a rank of a launch computes on (runtime.backend cuda with several ranks): one GPU
// per rank, the rank's local rank (its place on its node) indexing the GPUs its node shows.
//
// The trainer narrows CUDA_VISIBLE_DEVICES to that one GPU before the process's first CUDA call,
// so the rank's GPU is device 0 of every thread that touches CUDA (compute lane, comm lane,
// staging, the NCCL communicator) and no thread can land on another rank's GPU by default.
// NVML, which ignores CUDA_VISIBLE_DEVICES, finds the same GPU by its PCI bus id.
#include <string>

namespace asteria {

// The CUDA_VISIBLE_DEVICES value for local rank `local_rank` of the `ranks_per_node` ranks on
// its node, given what the variable held at launch (`visible`, null when unset):
//   unset or empty   the node's GPUs in CUDA's order: local rank k takes device k;
//   one entry        the launcher bound one GPU per rank (srun --gpus-per-task, --gpu-bind): kept;
//   n >= ranks_per_node entries   local rank k takes the k-th entry.
// An Error naming the variable and the counts when fewer GPUs than ranks are listed.
std::string rank_visible_devices(int local_rank, int ranks_per_node, const char* visible);

}  // namespace asteria

namespace asteria {

struct Topology;

// runtime.backend cuda: narrows CUDA_VISIBLE_DEVICES to this rank's GPU (several ranks) and
// checks that a device can be opened; an Error naming the rank and the reason when not.
void select_rank_device(const Topology& topo, int rank, int world);

}  // namespace asteria
