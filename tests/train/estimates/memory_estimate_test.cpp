// The memory estimate's refresh buffers (train/estimates/memory_estimate.hpp) against what a
// refresh allocates: each algorithm's, with the shipped refresh settings, on square and oblong
// blocks, its job and its workspace measured by their vectors' capacities after the refresh.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "optim/optimizer_factory.hpp"
#include "optim/preconditioner.hpp"
#include "train/estimates/memory_estimate.hpp"

namespace asteria {
namespace {

template <class T>
size_t held(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}
template <class Real>
size_t held(const matfn::Scratch<Real>& s) {
  return held(s.a) + held(s.b) + held(s.c) + held(s.d) + held(s.w) + held(s.lapack_a) + held(s.lapack_work) +
         held(s.lapack_iwork);
}
size_t held(const matfn::PartCarry& c) { return held(c.m32) + held(c.v32) + held(c.m64) + held(c.v64); }
size_t held(const matfn::Workspace& ws) {
  return held(ws.f64) + held(ws.f32) + held(ws.in) + held(ws.out) + held(ws.sums) + held(ws.carry);
}
size_t held(const RefreshJob& j) {
  return held(j.left) + held(j.right) + held(j.left_basis) + held(j.right_basis) + held(j.left_root) +
         held(j.right_root) + held(j.left_perm) + held(j.right_perm) + held(j.base_left_perm) +
         held(j.base_right_perm) + held(j.left_carry) + held(j.right_carry) + held(j.installed_left) +
         held(j.installed_right);
}

TEST(MemoryEstimate, RefreshBuffersHoldWhatEachAlgorithmsRefreshAllocates) {
  for (OptimizerKind kind : {OptimizerKind::Soap, OptimizerKind::Shampoo, OptimizerKind::KlShampoo})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{64, 64}, {48, 96}, {96, 40}}) {
      OptimConfig o;
      o.name = kind;
      const PreconditionerParams p = second_order_params(o).precond;
      auto pc = make_preconditioner(kind, "block", rows, cols, p);
      std::mt19937 rng(7);
      std::normal_distribution<float> normal;
      std::vector<float> g(static_cast<size_t>(rows * cols));
      RefreshJob step_job, job;
      matfn::Workspace step_ws, ws;
      for (int s = 0; s < 3; ++s) {
        for (float& x : g) x = normal(rng);
        pc->step(g.data(), step_job, step_ws, /*refresh=*/false);
      }
      pc->snapshot(job);
      pc->compute_refresh(job, ws);
      ASSERT_EQ(job.status, matfn::Status::Ok);
      const std::string what = std::string(to_string(kind)) + " " + std::to_string(rows) + " x " + std::to_string(cols);
      EXPECT_LE(static_cast<double>(held(job)), refresh_job_bytes(rows, cols)) << what;
      EXPECT_LE(static_cast<double>(held(ws)), refresh_workspace_bytes(std::max(rows, cols))) << what;
    }
}

}  // namespace
}  // namespace asteria

namespace asteria {
namespace {

// runtime.shadow.resident_jobs: the jobs in flight beyond it are counted on the disk tier, not in
// memory; the two add up to all of them in memory.
TEST(MemoryEstimate, ResidentJobsKeepTheRestOfTheRefreshesInFlightOnDisk) {
  auto config = [](const std::string& jobs) {
    return load_config_text("model:\n  preset: tiny\n  n_layers: 4\n", "jobs.yaml",
                            {"optim.name=soap", "runtime.mode=asteria", "train.steps=100", "train.warmup_steps=0",
                             "runtime.threads=2", "runtime.shadow.resident_jobs=" + jobs});
  };
  const MemoryEstimate all = process_memory(config("0")), three = process_memory(config("3"));
  EXPECT_EQ(all.jobs_on_disk, 0.0);
  EXPECT_GT(three.jobs_on_disk, 0.0);
  EXPECT_LT(three.refresh_work, all.refresh_work);
  EXPECT_NEAR(three.refresh_work + three.jobs_on_disk, all.refresh_work, 1e-6 * all.refresh_work);
  EXPECT_EQ(process_memory(config("100000")).refresh_work, all.refresh_work);
}

}  // namespace
}  // namespace asteria
