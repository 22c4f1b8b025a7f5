#pragma once
// The CUDA backend's side of a training run (runtime.backend cuda; docs/DESIGN.md "Backends"): the
// model on the device (Model<float, CudaOps>: parameters, gradients and activations in device
// memory) and the optimizer's step on its state in device memory:
//   AdamW   the host AdamW's own state tensors, bound to device memory, stepped with the same
//           adamw_update operations over the same ranges as the CPU's (AdamW::step_layer_with);
//   SOAP, Shampoo, KL-Shampoo   a twin SecondOrderOptimizer on the CUDA block backend
//           (optim/block_backend.hpp): the per-step work (statistics, basis changes, moments,
//           grafting, the update) on the device; refreshes on the host from snapshots of the
//           device state, inline (native) or on the shadow pipeline's host workers (asteria),
//           published back into device memory.
// The optimizer state's memory is the trainer's TierManager's, on backend(): stepping_optimizer()'s
// state tensors are bound into its device arena (GPU memory), or visit it from its pinned host
// arena and the disk tier as runtime.tiers says.
//
// The trainer's host model (Storage::Image: parameters only) and the host optimizer's counters
// stay the run's image: the device starts from them at upload() (after a resume restored into
// them, and restored the state through the tier manager), and checkpoints and the final
// parameters are read from them after download(). Everything else the trainer has (plan,
// executor, data, metrics, checkpoints) is the CPU run's, unchanged.
//
// Several ranks each compute on their own GPU (device 0 of the process: train/rank_device.hpp).
// With distributed.fsdp none each holds the whole model and the trainer all-reduces each layer's
// gradient in device memory over NCCL (Sharding::use_device_replicas) between backward and
// grad_norm. With full or hybrid (ZeRO-3, as on the CPU: fsdp/sharding.hpp) a rank holds its
// shards of the parameters and gradients and the few whole layers in flight in device memory
// (fsdp/device_shards.hpp), gathered and reduce-scattered over NCCL on the comm lane by the same
// plan ops as the CPU's; its optimizer twin steps its shards, and the host image is the host's
// shards (Sharding::shard_params).
//
// The device's work runs on one stream of the greatest priority, made current on the thread that
// constructs this (the trainer's compute lane), which is the thread that calls it; the
// collectives run on the communicators' own streams, called from the comm lane. Each call
// returns when its work is done, so work of one lane that the other reads is complete before the
// executor's dependency lets the other start.
//
// fp32 values with the linear layers' GEMMs on fp32 or (runtime.precision bf16, the default)
// bf16 operands and the kept activations stored in bf16.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/model.hpp"
#include "optim/optimizer.hpp"
#include "train/training_target.hpp"

namespace asteria {

struct Config;

class Backend;
class Sharding;

// make_device_training's TrainingTarget: name() is the device's ("cuda:0 (NVIDIA H200)"); peak_flops its
// dense bf16 peak when its name is one this knows (H100/H200/GH200 989e12, A100 312e12, B200
// 2250e12, L40S 362e12), else 0; backend() the device (the tier manager allocates and copies the
// optimizer state with it); stepping_optimizer() the second-order twin, or the host AdamW
// itself, whose state tensors the tier manager binds to device memory. upload() fills the device
// from the host image; download() and download_params() copy the device's parameters and the
// optimizer's counters back into it.

// Allocates the device side (upload() fills it); sharded, a collective over the shard and
// replica groups (their NCCL communicators). `optimizer` is built on sharding.owned_tables().
// Throws, naming the reason, when this build has no CUDA backend, no device can be opened, the
// device has fewer free bytes than the rank needs (train/estimates/memory_estimate.hpp
// device_memory, checked before allocating), or the optimizer is neither AdamW nor second-order.
std::unique_ptr<TrainingTarget> make_device_training(const Config& cfg, Model<float>& image, Optimizer& optimizer,
                                                     Sharding& sharding);

}  // namespace asteria
