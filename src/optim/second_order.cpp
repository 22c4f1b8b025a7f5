#include "optim/second_order.hpp"

#include <omp.h>

#include <cmath>

#include "core/error.hpp"

namespace asteria {

struct SecondOrderOptimizer::ThreadScratch {
  Buffer<float> grad;     // the dense, clipped gradient block
  RefreshJob job;
  matfn::Workspace ws;
};

SecondOrderOptimizer::SecondOrderOptimizer(const SecondOrderParams& p, const std::vector<ParamTable>& layers,
                                           bool own_memory)
    : p_(p) {
  size_t max_block = 0;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    blocks_.push_back(layer_blocks(l, layers[l], p.max_preconditioner_dim, p.precondition_embeddings));
    std::vector<std::unique_ptr<BlockPreconditioner>> pcs;
    for (const MatrixBlock& b : blocks_.back()) {
      pcs.push_back(make_preconditioner(p.algorithm, b.name, b.rows, b.cols, p.precond, own_memory));
      max_block = std::max(max_block, static_cast<size_t>(b.rows * b.cols));
    }
    precond_.push_back(std::move(pcs));
    skipped_in_a_row_.emplace_back(blocks_.back().size(), 0);
  }
  schedule_ = RefreshSchedule(p.algorithm, p.precond.precondition_frequency, p.precond.start_preconditioning_step,
                              p.stagger, blocks_);
  const bool embeddings = p.precondition_embeddings;
  adamw_ = std::make_unique<AdamW>(
      p.adamw_1d, layers, [embeddings](const ParamEntry& e) { return !is_preconditioned(e, embeddings); },
      own_memory);
  for (int t = 0; t < omp_get_max_threads(); ++t) {
    scratch_.push_back(std::make_unique<ThreadScratch>());
    scratch_.back()->grad.resize(max_block);
  }
}

SecondOrderOptimizer::~SecondOrderOptimizer() = default;

size_t SecondOrderOptimizer::state_bytes() const {
  size_t n = adamw_->state_bytes();
  for (auto& layer : precond_)
    for (auto& pc : layer) n += pc->state_bytes().total();
  return n;
}

std::vector<StateTensor*> SecondOrderOptimizer::layer_states(int layer) {
  std::vector<StateTensor*> out = adamw_->layer_states(layer);
  for (auto& pc : precond_[layer])
    for (StateTensor* s : pc->states()) out.push_back(s);
  return out;
}

void SecondOrderOptimizer::step_layer(int layer, float* params, const float* grads, float grad_scale,
                                      double lr, int64_t step) {
  adamw_->step_layer(layer, params, grads, grad_scale, lr, step);
  const auto& blocks = blocks_[layer];
  const int nb = static_cast<int>(blocks.size());
  const float flr = static_cast<float>(lr);
  const float decay = static_cast<float>(1.0 - lr * p_.weight_decay);
  // An exception cannot leave an OpenMP region: the first one is kept and rethrown after it.
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1)
  for (int bi = 0; bi < nb; ++bi) {
    try {
      const MatrixBlock& b = blocks[bi];
      ThreadScratch& s = *scratch_[omp_get_thread_num()];
      float* G = s.grad.data();
      bool finite = true;
      for (int64_t i = 0; i < b.rows; ++i) {
        const float* src = grads + b.offset + i * b.ld;
        float* dst = G + i * b.cols;
        for (int64_t j = 0; j < b.cols; ++j) {
          dst[j] = src[j] * grad_scale;
          finite &= std::isfinite(dst[j]);
        }
      }
      if (!finite) {
        int& skipped = skipped_in_a_row_[layer][bi];
        if (++skipped > p_.precond.max_failures)
          fail("gradient of ", b.name, " was non-finite ", skipped, " steps in a row; optim.max_failures is ",
               p_.precond.max_failures);
        continue;
      }
      skipped_in_a_row_[layer][bi] = 0;
      BlockPreconditioner& pc = *precond_[layer][bi];
      pc.before_refresh(G);
      const bool due = pc.has_direction() && schedule_.due(layer, bi, step);
      policy_->at_refresh_point(layer, bi, pc, step, due, s.job, s.ws);
      pc.after_refresh(G);
      if (!pc.has_direction()) continue;
      const float* D = pc.direction();
      for (int64_t i = 0; i < b.rows; ++i) {
        float* w = params + b.offset + i * b.ld;
        const float* d = D + i * b.cols;
        for (int64_t j = 0; j < b.cols; ++j) w[j] = (w[j] - flr * d[j]) * decay;
      }
    } catch (...) {
#pragma omp critical(asteria_second_order_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace asteria
