#pragma once
// The optimizer over preconditioner blocks (Shampoo, SOAP, KL-Shampoo). Each layer's 2-D
// parameters are cut into blocks (blocks.hpp) with one BlockPreconditioner each; the remaining
// tensors (norm weights; embeddings unless precondition_embeddings) go to an AdamW with the
// adamw_1d hyperparameters.
//
// step_layer, per block (blocks of a layer run in parallel, each on one thread; with stagger,
// blocks refreshing inline run alone on every thread when they are fewer than the threads):
//   G = clip_scale * grad block (copied dense); a non-finite G skips the block for this step and
//   counts as a failure of the block (NaN never reaches the weights or the statistics);
//   before_refresh(G); the refresh policy at the refresh point; after_refresh(G); then the
//   update with decoupled weight decay in the order of each algorithm's reference code:
//     Shampoo (Distributed Shampoo adds wd * W to the grafted direction):  W <- W - lr * (D + wd * W)
//     SOAP, KL-Shampoo (decay after the update):  W' = W - lr * D;  W <- W' - lr * wd * W'
//   both as decrements (lr * wd rounded to fp32 once, never the factor 1 - lr * wd), compensated
//   when `compensated` (update_compensation.hpp).
//
// On a device backend (block_backend.hpp) the same steps run on the
// device, one block after another on the calling thread's stream (the device is the parallel
// part); refresh jobs stay host memory, so the refresh policies (inline, or the shadow
// pipeline's host workers) work unchanged. Its state tensors are bound by the owner (own_memory
// false) to device memory.
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.hpp"
#include "optim/blocks.hpp"
#include "optim/preconditioner.hpp"
#include "optim/refresh_policy.hpp"
#include "optim/refresh_schedule.hpp"
#include "optim/update_compensation.hpp"

namespace asteria {

struct SecondOrderParams {
  OptimizerKind algorithm = OptimizerKind::Soap;
  PreconditionerParams precond;
  double weight_decay = 0.0;
  int64_t max_preconditioner_dim = 1024;
  bool precondition_embeddings = true;
  bool stagger = false;               // offsets balanced by refresh cost (refresh_schedule.hpp)
  AdamWParams adamw_1d;                // its `compensated` is ignored: the layer's is `compensated`
  bool compensated = true;             // Kahan-compensated updates of every parameter
};

class SecondOrderOptimizer final : public Optimizer {
 public:
  SecondOrderOptimizer(const SecondOrderParams& p, const std::vector<ParamTable>& layers, bool own_memory = true,
                       const BlockBackend& backend = host_block_backend());
  ~SecondOrderOptimizer() override;
  void step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                  int64_t step) override {
    step_part(layer, {}, params, grads, grad_scale, lr, step);
  }
  void step_part(int layer, BlockRange blocks, float* params, const float* grads, float grad_scale, double lr,
                 int64_t step) override;
  size_t state_bytes() const override;
  // The layer's update compensation (when on), its AdamW states, then each block's (in block
  // order).
  std::vector<StateTensor*> layer_states(int layer) override;
  // Block state as "optim/blocks/<tensor>/<row0>_<col0>/<state>" with the block's coordinates.
  std::vector<std::vector<StatePiece>> state_pieces(int layer) const override;
  std::vector<OptimizerCounters> counters() const override;
  void restore_counters(const std::vector<OptimizerCounters>& saved) override;

  const std::vector<MatrixBlock>& blocks(int layer) const { return blocks_[layer]; }
  const std::string& entry_name(int layer, int entry) const { return entry_names_[layer][entry]; }
  BlockPreconditioner& preconditioner(int layer, int block) { return *precond_[layer][block]; }
  int num_layers() const { return static_cast<int>(blocks_.size()); }
  const RefreshSchedule& schedule() const { return schedule_; }
  // A sharded rank's optimizer (its tables are its shards of `whole`, the model's tables): its
  // blocks take their indices among the whole layers' blocks, and it refreshes on the whole
  // model's (staggered) schedule.
  void follow_whole_model(const std::vector<ParamTable>& whole);
  // Block b of layer l's index among the whole layer's blocks (b itself unless sharded), and back
  // (-1: not one of this optimizer's blocks).
  int whole_block(int layer, int block) const { return whole_index_.empty() ? block : whole_index_[layer][block]; }
  int own_block(int layer, int whole) const;
  OptimizerKind algorithm() const { return p_.algorithm; }
  // The matrix-multiply FLOPs of a step of this optimizer's blocks outside their refreshes (the
  // sum of step_matmul_flops over them: a sharded rank's share; run_info.json).
  double step_matmul_flops() const;
  // Where refreshes run (default: inline). The policy must outlive the optimizer's use.
  void set_refresh_policy(RefreshPolicy* policy) { policy_ = policy ? policy : &inline_; }

 private:
  struct ThreadScratch;
  struct BlockStep {   // one step_layer call's arguments
    int layer;
    float* params;
    const float* grads;
    float grad_scale, lr, lr_wd;
    int64_t step;
  };
  void step_block(const BlockStep& bs, int block, ThreadScratch& scratch);
  SecondOrderParams p_;
  const BlockBackend& backend_;
  std::vector<std::vector<MatrixBlock>> blocks_;
  std::vector<std::vector<std::string>> entry_names_;   // [layer][entry]: the parameter tensors'
  std::string block_key(int layer, int block) const;    // "optim/blocks/<tensor>/<row0>_<col0>"
  RefreshSchedule schedule_;
  std::vector<std::vector<int>> whole_index_;   // [layer][block]: see whole_block (empty: unsharded)
  std::vector<std::vector<std::unique_ptr<BlockPreconditioner>>> precond_;
  std::vector<std::vector<int>> skipped_in_a_row_;   // non-finite gradients, per block
  std::unique_ptr<AdamW> adamw_;
  UpdateCompensation comp_;
  InlineRefresh inline_;
  RefreshPolicy* policy_ = &inline_;
  std::vector<std::unique_ptr<ThreadScratch>> scratch_;
  std::vector<char> after_loop_;   // step_layer's blocks run after its parallel loop
  // Each layer's block indices by step cost (step_matmul_flops), the costliest first: the order
  // step_part's threads take them in.
  std::vector<std::vector<int>> loop_order_;
};

}  // namespace asteria
