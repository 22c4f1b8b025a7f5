#pragma once
// The optimizer over preconditioner blocks (Shampoo, SOAP, KL-Shampoo). Each layer's 2-D
// parameters are cut into blocks (blocks.hpp) with one BlockPreconditioner each; the remaining
// tensors (norm weights; embeddings unless precondition_embeddings) go to an AdamW with the
// adamw_1d hyperparameters.
//
// step_layer, per block (blocks of a layer run in parallel, each on one thread):
//   G = clip_scale * grad block (copied dense); a non-finite G skips the block for this step and
//   counts as a failure of the block (NaN never reaches the weights or the statistics);
//   the preconditioner's native step (inline refresh when due);
//   W <- W - lr * D;  W <- W - lr * weight_decay * W.
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.hpp"
#include "optim/blocks.hpp"
#include "optim/preconditioner.hpp"

namespace asteria {

struct SecondOrderParams {
  std::string algorithm;              // shampoo, soap, kl_shampoo
  PreconditionerParams precond;
  double weight_decay = 0.0;
  int64_t max_preconditioner_dim = 1024;
  bool precondition_embeddings = true;
  AdamWParams adamw_1d;
};

class SecondOrderOptimizer final : public Optimizer {
 public:
  SecondOrderOptimizer(const SecondOrderParams& p, const std::vector<ParamTable>& layers);
  ~SecondOrderOptimizer() override;
  void step_layer(int layer, float* params, const float* grads, float grad_scale, double lr,
                  int64_t step) override;
  size_t state_bytes() const override;

  const std::vector<MatrixBlock>& blocks(int layer) const { return blocks_[layer]; }
  BlockPreconditioner& preconditioner(int layer, int block) { return *precond_[layer][block]; }

 private:
  struct ThreadScratch;
  SecondOrderParams p_;
  std::vector<std::vector<MatrixBlock>> blocks_;
  std::vector<std::vector<std::unique_ptr<BlockPreconditioner>>> precond_;
  std::vector<std::vector<int>> skipped_in_a_row_;   // non-finite gradients, per block
  std::unique_ptr<AdamW> adamw_;
  std::vector<std::unique_ptr<ThreadScratch>> scratch_;
};

}  // namespace asteria
