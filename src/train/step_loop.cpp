#include "train/step_loop.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/lr_schedule.hpp"
#include "train/metrics.hpp"
#include "train/replica_check.hpp"
#include "train/stop_signals.hpp"
#include "train/training_run.hpp"

namespace fs = std::filesystem;

namespace asteria {

namespace {

// The process's peak resident memory so far (getrusage; Linux reports KiB).
double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

}  // namespace

StepLoop::StepLoop(TrainingRun& run) : r_(run) {
  inputs_.resize(static_cast<size_t>(r_.cfg.train.micro_batch) * r_.cfg.model.seq_len);
  targets_.resize(inputs_.size());
  grad_sq_.assign(r_.model->num_layers(), 0.0);
  bind_step_handlers();
}

// The handlers of the model's and the optimizer's ops, and of the replicas' all-reduce.
void StepLoop::bind_step_handlers() {
  Executor& ex = *r_.executor;
  TrainingTarget& target = *r_.target;
  const int last = r_.model->num_layers() - 1;
  const double grad_scale = 1.0 / r_.cfg.train.grad_accum;
  ex.bind(OpKind::LoadBatch, [this, &target](const Op&) {
    r_.loader->next_batch(r_.cfg.train.micro_batch, inputs_.data(), targets_.data(), r_.rank, r_.world);
    target.set_batch(inputs_.data(), targets_.data());
  });
  ex.bind(OpKind::Forward, [this, &target, last](const Op& op) {
    const double loss = target.forward(op.layer);
    if (op.layer == last) loss_sum_ += loss;
  });
  ex.bind(OpKind::Recompute, [&target](const Op& op) { target.recompute(op.layer); });
  ex.bind(OpKind::Backward, [&target, grad_scale](const Op& op) { target.backward(op.layer, grad_scale); });
  // Replicated: the mean over the ranks of the whole gradient (each already the mean of its micro-batches).
  ex.bind(OpKind::AllReduce, [this, &target](const Op& op) {
    r_.sharding->reduce_over_replicas(op.layer, target.grads(op.layer), "all_reduce of the gradient of " + r_.model->layer_name(op.layer));
  });
  ex.bind(OpKind::GradNorm, [this, &target](const Op& op) { grad_sq_[op.layer] = target.grad_sum_of_squares(op.layer); });
  ex.bind(OpKind::ClipGrads, [this](const Op&) { clip_grads(); });
  ex.bind(OpKind::OptimStep, [this, &target](const Op& op) { target.optim_step(op.layer, op.blocks, clip_scale_, lr_, step_); });
}

void StepLoop::clip_grads() {
  double s = 0;
  for (double x : grad_sq_) s += x;
  // Sharded: each rank summed its own shards. Every comm op of the plan is done by now (the
  // reductions are this op's dependencies, the gathers preceded the forward), so the compute
  // lane may call the communicator.
  r_.sharding->sum_over_group(&s, 1, "all_reduce of the gradient norm");
  grad_norm_ = std::sqrt(s);
  // Here every rank holds the parameters the step computed with.
  const int64_t every = r_.cfg.distributed.check_every;
  if (every > 0 && step_ % every == 0) {
    Timer t;
    check_replicas_identical("step " + std::to_string(step_));
    replica_check_s_ = t.seconds();
  }
  const double clip = r_.cfg.optim.grad_clip;
  clip_scale_ = (clip > 0 && grad_norm_ > clip) ? static_cast<float>(clip / grad_norm_) : 1.0f;
}

// The replicas must hold the same bits (train/replica_check.hpp): this rank's tensors (its shards
// when sharded) against those of the first rank holding the same part.
void StepLoop::check_replicas_identical(const std::string& when) {
  if (r_.world == 1) return;
  r_.target->download_params();   // the device's parameters into the image hashed here
  Sharding& sh = *r_.sharding;
  const std::vector<TensorBits> tensors = owned_tensors(sh.owned_tables(), [this, &sh](int l) {
    return sh.sharded() ? sh.shard_params(l) : r_.model->params(l);
  });
  asteria::check_replicas_identical(*r_.comm, sh.group_rank(), tensors, when);
}

double StepLoop::run_step(StepMetrics& metrics, const StopSignals& signals) {
  lr_ = lr_at(step_, r_.cfg.optim.lr, r_.cfg.train);
  r_.builder.build({step_, r_.model->num_layers(), r_.cfg.train.grad_accum, &r_.tiers->layout().parts}, plan_);
  loss_sum_ = 0;
  r_.executor->reset_times();
  metrics.begin_step();
  Timer t;
  r_.executor->run(plan_);
  record_and_reduce(metrics, signals);
  step_s_ = t.seconds();
  const double loss = metrics.total("loss_sum") / (r_.cfg.train.grad_accum * r_.world);
  ASTERIA_CHECK(std::isfinite(loss), "training diverged: loss is ", loss, " at step ", step_);
  return loss;
}

// The step's figures from every subsystem, and what the loop needs from every rank (the loss, a
// stop asked on any rank, a sharded checkpoint's files written), combined in one collective.
void StepLoop::record_and_reduce(StepMetrics& m, const StopSignals& signals) {
  Checkpointer* ckpt = r_.checkpointer.get();
  const Executor& ex = *r_.executor;
  m.sum("loss_sum", loss_sum_, /*written=*/false);
  m.sum("stop", static_cast<double>(signals.pending()), false);
  const bool ckpt_pending = ckpt && ckpt->shard_write_pending();
  m.sum("checkpoint_pending", ckpt_pending ? 1 : 0, false);
  m.sum("checkpoint_writing", ckpt_pending && !ckpt->shard_written() ? 1 : 0, false);
  m.per_rank("peak_rss_bytes", peak_rss_bytes());   // its part of the state differs when sharded
  r_.sharding->record_metrics(m, ex);
  if (r_.coherence) r_.coherence->record_metrics(m, ex, step_);
  if (r_.shadow) r_.shadow->record_metrics(m, ex);
  r_.target->record_metrics(m);
  r_.tiers->record_metrics(m, ex);
  r_.placement->record_metrics(m);
  m.reduce([this](double* data, size_t count) {
    Request req = r_.comm->all_reduce(data, count, "the metrics of step " + std::to_string(step_));
    r_.comm->wait(req);
  });
  // A sharded async checkpoint every writing rank has written: all of them publish it now.
  if (m.total("checkpoint_pending") > 0 && m.total("checkpoint_writing") == 0 && ckpt_pending) ckpt->finish();
}

// The compute lane's own figures of the step.
void StepLoop::record_step(StepMetrics& m, double loss, double step_s, const RunRates& rates, double elapsed_s) {
  const Executor& ex = *r_.executor;
  const double tps = rates.tokens_per_step / step_s;
  m.local("step", step_);
  m.local("loss", loss);
  m.local("lr", lr_);
  m.local("grad_norm", grad_norm_);
  m.local("tokens", step_ * rates.tokens_per_step);
  m.local("tokens_per_s", tps);
  m.local("mfu", rates.peak_flops > 0 ? tps * rates.flops_per_token / rates.peak_flops : 0.0);
  m.local("step_time_s", step_s);
  m.local("data_s", ex.seconds(OpKind::LoadBatch));
  m.local("fwd_s", ex.seconds(OpKind::Forward));
  m.local("recompute_s", ex.seconds(OpKind::Recompute));
  m.local("bwd_s", ex.seconds(OpKind::Backward));
  m.local("optim_s", ex.seconds(OpKind::GradNorm) + ex.seconds(OpKind::ClipGrads) + ex.seconds(OpKind::OptimStep));
  m.local("elapsed_s", elapsed_s);
  if (replica_check_s_ > 0) m.local("replica_check_s", std::exchange(replica_check_s_, 0.0));
  if (r_.cfg.model.z_loss > 0) m.local("z_loss", r_.target->last_z_loss());
}

// The mean eval loss over the eval batches (between steps).
double StepLoop::evaluate() {
  double sum = 0;
  for (int b = 0; b < r_.eval->count(); ++b) {
    r_.eval->get(b, inputs_.data(), targets_.data());
    sum += r_.target->eval_loss(inputs_.data(), targets_.data());
  }
  r_.sharding->take_bytes();   // eval's gathers are no step's comm
  return sum / r_.eval->count();
}

TrainResult StepLoop::run() {
  const Config& cfg = r_.cfg;   // the placement's changes between steps included
  const RunRates rates = start_run_dir(r_);
  const fs::path dir = cfg.run.dir;
  MetricsWriter metrics_file = r_.writer() ? MetricsWriter((dir / "metrics.jsonl").string(), !r_.resume_dir.empty()) : MetricsWriter();
  ProgressLine progress(cfg.train.steps, cfg.run.log_every);
  StepMetrics metrics(r_.rank, r_.world);
  const StopSignals signals;
  TrainResult result;
  result.last_step = r_.resumed.step;
  Timer wall;
  const double elapsed0 = r_.resumed.elapsed_s;   // a resumed run's clock goes on
  double timed_tokens = 0, timed_seconds = 0, energy_j_total = 0;
  const int64_t first = r_.resumed.step + 1;
  const int64_t last = cfg.train.stop_after > 0 ? std::min(cfg.train.stop_after, cfg.train.steps) : cfg.train.steps;
  for (step_ = first; step_ <= last; ++step_) {
    if (step_ > first) r_.placement->adapt(step_, r_.cfg, *r_.tiers, *r_.sharding, r_.shadow.get());   // before the plan
    const std::optional<double> energy0 = r_.target->energy_j();
    const double loss = run_step(metrics, signals);
    if (step_ > first) {
      timed_tokens += static_cast<double>(rates.tokens_per_step);
      timed_seconds += step_s_;
    }
    record_step(metrics, loss, step_s_, rates, elapsed0 + wall.seconds());
    if (const std::optional<double> energy1 = r_.target->energy_j(); energy0 && energy1) {
      metrics.local("energy_j", *energy1 - *energy0);   // the target's counter over the step (NVML, RAPL)
      energy_j_total += *energy1 - *energy0;
      metrics.local("energy_j_total", energy_j_total);
    }
    double eval_loss = -1;
    if (r_.eval && ((cfg.train.eval_every > 0 && step_ % cfg.train.eval_every == 0) || step_ == cfg.train.steps)) {
      Timer te;
      eval_loss = result.final_eval_loss = evaluate();
      metrics.local("eval_loss", eval_loss);
      metrics.local("eval_s", te.seconds());
    }
    // The step's line first: a checkpoint of step N always finds lines 1..N written, so a resumed
    // metrics.jsonl (cut back to N) never misses one.
    if (r_.checkpointer) r_.checkpointer->record_metrics(metrics, *r_.executor);
    metrics_file.write(metrics.record());
    if (r_.writer()) progress.update(step_, loss, rates.tokens_per_step / step_s_, elapsed0 + wall.seconds(), eval_loss);
    const int sig = metrics.total("stop") > 0 ? (signals.pending() ? signals.pending() : SIGTERM) : 0;
    checkpoint_if_due(last, sig, elapsed0 + wall.seconds(), rates.tokens_per_step, result);
    result.final_loss = loss;
    result.last_step = step_;
    if (sig) {
      result.signal = sig;
      break;
    }
  }
  finish_run(last, rates.tokens_per_step, result);
  if (r_.writer()) progress.finish();
  check_replicas_identical("the end of training");
  result.tokens_per_s = timed_seconds > 0 ? timed_tokens / timed_seconds : 0;
  gather_final_params();
  return result;
}

// A checkpoint every checkpoint.every steps, at the last step, and when a signal asks. One rank
// writes a replicated run's checkpoint; every rank of one shard group a sharded one's.
void StepLoop::checkpoint_if_due(int64_t last, int sig, double elapsed_s, int64_t tokens_per_step, TrainResult& result) {
  const CheckpointConfig& cc = r_.cfg.checkpoint;
  if (!r_.checkpointer || !cc.enabled) return;
  if (!((cc.every > 0 && step_ % cc.every == 0) || step_ == last || sig)) return;
  // Replicas: the owners hand their refreshes in flight to the writing replica (every rank).
  if (r_.shadow) r_.shadow->prepare_checkpoint();
  r_.target->download();   // the image the checkpoint is written from
  if (!r_.sharding->writes_checkpoints()) return;
  r_.checkpointer->save(step_, step_ * tokens_per_step, elapsed_s, step_ < last && !sig);
  result.checkpoint = (fs::path(r_.checkpointer->root()) / checkpoint_dir_name(step_)).string();
}

// After the last step: the last checkpoint published, the image up to date.
void StepLoop::finish_run(int64_t last, int64_t tokens_per_step, TrainResult& result) {
  // Resumed with nothing left to train (train.stop_after or train.steps at the checkpoint's
  // step): the loaded state is written as this run's checkpoint of that step, at this run's world
  // size and sharding (a checkpoint re-laid out for another launch).
  const int64_t resumed = r_.resumed.step;
  if (r_.checkpointer && r_.cfg.checkpoint.enabled && !r_.resume_dir.empty() && resumed >= last) {
    if (r_.shadow) r_.shadow->prepare_checkpoint();
    if (r_.sharding->writes_checkpoints()) {
      r_.checkpointer->save(resumed, resumed * tokens_per_step, r_.resumed.elapsed_s, false);
      result.checkpoint = (fs::path(r_.checkpointer->root()) / checkpoint_dir_name(resumed)).string();
    }
  }
  if (r_.checkpointer) r_.checkpointer->finish();
  r_.target->download();   // final_params() reads the image
}

// Sharded: the whole parameters on every rank, gathered from the shards now (a collective, so
// not on demand). One process reads them from the model when asked, so that a model that fills
// the machine is not copied at the end.
void StepLoop::gather_final_params() {
  final_params_.clear();
  if (!r_.sharding->sharded()) return;
  for (int l = 0; l < r_.model->num_layers(); ++l) {
    std::vector<float>& p = final_params_.emplace_back(r_.model->table(l).numel);
    r_.sharding->gather(l, p.data(), "gather of " + r_.model->layer_name(l) + " after the last step");
  }
}

}  // namespace asteria
