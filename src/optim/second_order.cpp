#include "optim/second_order.hpp"

#include <omp.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "core/error.hpp"

namespace asteria {

namespace {
std::vector<std::vector<MatrixBlock>> all_blocks(const std::vector<ParamTable>& layers, int64_t max_dim, bool embeddings) {
  std::vector<std::vector<MatrixBlock>> blocks;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) blocks.push_back(layer_blocks(l, layers[l], max_dim, embeddings));
  return blocks;
}
}  // namespace

struct SecondOrderOptimizer::ThreadScratch {
  Buffer<float> grad;     // the dense, clipped gradient block
  RefreshJob job;
  matfn::Workspace ws;
};

SecondOrderOptimizer::SecondOrderOptimizer(const SecondOrderParams& p, const std::vector<ParamTable>& layers,
                                           bool own_memory, const BlockBackend& backend)
    : p_(p),
      backend_(backend),
      blocks_(all_blocks(layers, p.max_preconditioner_dim, p.precondition_embeddings)),
      comp_(p.compensated, layers, own_memory, blocks_) {
  size_t max_block = 0;
  for (int l = 0; l < static_cast<int>(layers.size()); ++l) {
    entry_names_.emplace_back();
    for (const ParamEntry& e : layers[l].entries) entry_names_.back().push_back(e.name);
    std::vector<std::unique_ptr<BlockPreconditioner>> pcs;
    for (const MatrixBlock& b : blocks_[l]) {
      pcs.push_back(make_preconditioner(p.algorithm, b.name, b.rows, b.cols, p.precond, own_memory, backend));
      max_block = std::max(max_block, static_cast<size_t>(b.rows * b.cols));
    }
    precond_.push_back(std::move(pcs));
    std::vector<int> order(blocks_[l].size());
    std::iota(order.begin(), order.end(), 0);
    const auto cost = [&](int bi) { return asteria::step_matmul_flops(p.algorithm, blocks_[l][bi].rows, blocks_[l][bi].cols); };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cost(a) > cost(b); });
    loop_order_.push_back(std::move(order));
    skipped_in_a_row_.emplace_back(blocks_[l].size(), 0);
  }
  schedule_ = RefreshSchedule(p.algorithm, p.precond.precondition_frequency, p.precond.start_preconditioning_step,
                              p.stagger, blocks_);
  const bool embeddings = p.precondition_embeddings;
  AdamWParams adamw_1d = p.adamw_1d;
  adamw_1d.compensated = false;   // it updates its part of the layer's compensation (comp_)
  adamw_ = std::make_unique<AdamW>(
      adamw_1d, layers, [embeddings](const ParamEntry& e) { return !is_preconditioned(e, embeddings); },
      own_memory);
  for (int t = 0; t < omp_get_max_threads(); ++t) {
    scratch_.push_back(std::make_unique<ThreadScratch>());
    if (!backend.on_device()) scratch_.back()->grad.resize(max_block);   // a device's is backend scratch
  }
}

SecondOrderOptimizer::~SecondOrderOptimizer() = default;

size_t SecondOrderOptimizer::state_bytes() const {
  size_t n = adamw_->state_bytes() + comp_.state_bytes();
  for (auto& layer : precond_)
    for (auto& pc : layer) n += pc->state_bytes().total();
  return n;
}

void SecondOrderOptimizer::follow_whole_model(const std::vector<ParamTable>& whole) {
  std::vector<std::vector<MatrixBlock>> blocks;
  whole_index_.clear();
  for (int l = 0; l < num_layers(); ++l) {
    blocks.push_back(layer_blocks(l, whole[l], p_.max_preconditioner_dim, p_.precondition_embeddings));
    whole_index_.emplace_back();
    for (const MatrixBlock& b : blocks_[l]) {
      const int i = whole_block_index(blocks.back(), whole[l], b, entry_names_[l][b.entry]);
      ASTERIA_ASSERT(i >= 0, "block ", b.name, " is not a block of the whole layer ", l);
      whole_index_.back().push_back(i);
    }
  }
  schedule_ = RefreshSchedule(p_.algorithm, p_.precond.precondition_frequency, p_.precond.start_preconditioning_step,
                              p_.stagger, blocks)
                  .subset(whole_index_);
}

int SecondOrderOptimizer::own_block(int layer, int whole) const {
  for (int b = 0; b < static_cast<int>(blocks_[layer].size()); ++b)
    if (whole_block(layer, b) == whole) return b;
  return -1;
}

std::vector<StateTensor*> SecondOrderOptimizer::layer_states(int layer) {
  std::vector<StateTensor*> out = comp_.layer_states(layer);
  for (StateTensor* s : adamw_->layer_states(layer)) out.push_back(s);
  for (auto& pc : precond_[layer])
    for (StateTensor* s : pc->states()) out.push_back(s);
  return out;
}

std::string SecondOrderOptimizer::block_key(int layer, int block) const {
  const MatrixBlock& b = blocks_[layer][block];
  return state_piece_name("optim/blocks", entry_names_[layer][b.entry],
                          std::to_string(b.row0) + "_" + std::to_string(b.col0));
}

std::vector<std::vector<StatePiece>> SecondOrderOptimizer::state_pieces(int layer) const {
  std::vector<std::vector<StatePiece>> out = comp_.state_pieces(layer);
  for (auto& p : adamw_->state_pieces(layer)) out.push_back(std::move(p));
  for (int bi = 0; bi < static_cast<int>(blocks_[layer].size()); ++bi) {
    const MatrixBlock& b = blocks_[layer][bi];
    for (StateTensor* s : precond_[layer][bi]->states()) {
      // "<block> / L^-1/4" -> ".../L^-1_4": '/' separates HDF5 groups.
      std::string tensor = s->spec().name.substr(s->spec().name.rfind(" / ") + 3);
      for (char& ch : tensor)
        if (ch == '/') ch = '_';
      out.push_back({{block_key(layer, bi) + "/" + tensor, s->spec().shape, 0, {b.row0, b.rows, b.col0, b.cols}}});
    }
  }
  return out;
}

std::vector<OptimizerCounters> SecondOrderOptimizer::counters() const {
  std::vector<OptimizerCounters> out;
  for (int l = 0; l < num_layers(); ++l)
    for (int bi = 0; bi < static_cast<int>(blocks_[l].size()); ++bi) {
      std::vector<int64_t> c = precond_[l][bi]->counters();
      c.push_back(skipped_in_a_row_[l][bi]);
      out.push_back({block_key(l, bi) + "/counters", std::move(c)});
    }
  return out;
}

void SecondOrderOptimizer::restore_counters(const std::vector<OptimizerCounters>& saved) {
  std::map<std::string, const std::vector<int64_t>*> by_name;
  for (const OptimizerCounters& c : saved) by_name[c.name] = &c.values;
  for (int l = 0; l < num_layers(); ++l)
    for (int bi = 0; bi < static_cast<int>(blocks_[l].size()); ++bi) {
      const std::string name = block_key(l, bi) + "/counters";
      auto it = by_name.find(name);
      ASTERIA_CHECK(it != by_name.end() && !it->second->empty(), "the counters '", name, "' are missing");
      std::vector<int64_t> c = *it->second;
      skipped_in_a_row_[l][bi] = static_cast<int>(c.back());
      c.pop_back();
      precond_[l][bi]->restore_counters(c);
    }
}

double SecondOrderOptimizer::step_matmul_flops() const {
  double flops = 0;
  for (const auto& layer : blocks_)
    for (const MatrixBlock& b : layer) flops += asteria::step_matmul_flops(p_.algorithm, b.rows, b.cols);
  return flops;
}

void SecondOrderOptimizer::step_part(int layer, BlockRange blocks, float* params, const float* grads,
                                     float grad_scale, double lr, int64_t step) {
  UpdateCompensation* comp = comp_.enabled() ? &comp_ : nullptr;
  const int nb = static_cast<int>(blocks_[layer].size());
  const int first = blocks.first, end = blocks.end_in(nb);
  ASTERIA_ASSERT(first >= 0 && first <= end && end <= nb, "layer ", layer, ": blocks ", first, "-", end, " of ", nb);
  if (first == 0) {
    if (backend_.on_device()) {
      adamw_->update_with(layer, params, comp, grads, grad_scale, lr, step,
                          [this](auto... args) { backend_.adamw_update(args...); });
    } else {
      adamw_->update(layer, params, comp, grads, grad_scale, lr, step);
    }
  }
  const BlockStep bs{layer, params, grads, grad_scale, static_cast<float>(lr),
                     static_cast<float>(lr * p_.weight_decay), step};
  // Which blocks run after the loop is decided over the whole layer, whatever the part, so that
  // stepping in parts changes no block's thread count (and no bits).
  // An inline refresh inside the block loop runs on one thread. With a staggered schedule
  // usually one block of a layer refreshes at a step, and the other threads would idle through
  // it; when fewer blocks refresh than there are threads, they run after the loop, one at a time,
  // where BLAS and LAPACK use every thread. LAPACK on several threads rounds differently from
  // one, so this is for staggered schedules only: without stagger a refresh always runs on one
  // thread, as on an asteria host worker, which keeps native bit-identical to asteria at D = 0.
  after_loop_.assign(static_cast<size_t>(nb), 0);
  if (p_.stagger && policy_->refreshes_inline()) {
    int due = 0;
    for (int bi = 0; bi < nb; ++bi) due += after_loop_[bi] = schedule_.due(layer, bi, step);
    if (due >= omp_get_max_threads()) after_loop_.assign(static_cast<size_t>(nb), 0);
  }
  // Blocks whose refresh point exchanges a version with other ranks run after the loop too, on
  // this thread in block order: every rank then makes those exchanges in the same order, and no
  // two threads share the protocol.
  for (int bi = 0; bi < nb; ++bi)
    if (policy_->exchanges_at(layer, bi, step, schedule_.due(layer, bi, step))) after_loop_[bi] = 1;
  // An exception cannot leave an OpenMP region: the first one is kept and rethrown after it.
  // A device backend's blocks go one after another on this thread's stream. The threads take the
  // blocks costliest first (loop_order_): in table order a layer's last block was one of its
  // largest, and a thread done early idled through it. Which thread steps a block changes no bits.
  std::exception_ptr error;
  const bool host = !backend_.on_device();
#pragma omp parallel for schedule(dynamic, 1) if (host)
  for (int k = 0; k < nb; ++k) {
    const int bi = loop_order_[layer][k];
    if (bi < first || bi >= end || after_loop_[bi]) continue;
    try {
      step_block(bs, bi, *scratch_[omp_get_thread_num()]);
    } catch (...) {
#pragma omp critical(asteria_second_order_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  for (int bi = first; bi < end; ++bi)
    if (after_loop_[bi]) step_block(bs, bi, *scratch_[0]);
}

void SecondOrderOptimizer::step_block(const BlockStep& bs, int bi, ThreadScratch& s) {
  const int layer = bs.layer;
  const MatrixBlock& b = blocks_[layer][bi];
  float* G = backend_.on_device() ? backend_.scratch(BlockBackend::kGradientSlot, static_cast<size_t>(b.rows * b.cols))
                                  : s.grad.data();
  if (!backend_.scaled_copy_finite(bs.grads + b.offset, b.ld, b.rows, b.cols, bs.grad_scale, G)) {
    int& skipped = skipped_in_a_row_[layer][bi];
    if (++skipped > p_.precond.max_failures)
      fail("gradient of ", b.name, " was non-finite ", skipped, " steps in a row; optim.max_failures is ",
           p_.precond.max_failures);
    return;
  }
  skipped_in_a_row_[layer][bi] = 0;
  BlockPreconditioner& pc = *precond_[layer][bi];
  pc.before_refresh(G);
  const bool due = pc.has_direction() && schedule_.due(layer, bi, bs.step);
  policy_->at_refresh_point(layer, bi, pc, bs.step, due, s.job, s.ws);
  pc.after_refresh(G);
  if (pc.has_direction())
    backend_.apply_update(bs.params + b.offset, comp_.at(layer, b.offset), b.ld, pc.direction(), b.rows,
                          b.cols, bs.lr, bs.lr_wd, /*decay_first=*/p_.algorithm == OptimizerKind::Shampoo);
}

}  // namespace asteria
