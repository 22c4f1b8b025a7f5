// The shadow pipeline's job buffers (runtime/shadow_job_buffers.hpp): at most resident_jobs
// buffer sets, the waiting job furthest from its publish step parked to lend its buffers (ties:
// the lowest (layer, block, order), whatever the order the jobs were lent in), read back bit for
// bit at its next hold; a job the pipeline says is not waiting, or one held, is never parked (a
// set is lent beyond the budget instead, and freed when it comes back).
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "runtime/shadow_job_buffers.hpp"
#include "small_soap.hpp"

namespace asteria {
namespace {

ParamTable table() { return testing::small_table(); }
SecondOrderParams soap() { return testing::small_soap(); }

// A computed job of a rows x cols block (what a finished job's image keeps).
RefreshJob results(int64_t rows, int64_t cols, double seed) {
  RefreshJob j;
  j.rows = rows;
  j.cols = cols;
  j.left_basis.assign(static_cast<size_t>(rows * rows), seed);
  j.right_basis.assign(static_cast<size_t>(cols * cols), -seed);
  j.left_perm.assign(static_cast<size_t>(rows), 0);
  j.right_perm.assign(static_cast<size_t>(cols), 1);
  j.status = matfn::Status::Ok;
  return j;
}

class JobBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("asteria-job-buffers-" + std::to_string(std::random_device{}()));
    path_ = (dir_ / "tiers" / "state.shadow-jobs.bin").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The pipeline's side: every loan waits and is finished unless marked busy; its order is given.
  JobBuffers::WaitingTest test() {
    return [this](std::vector<JobBuffers::Candidate>& candidates) {
      for (JobBuffers::Candidate& c : candidates) {
        c.waiting = busy_.count(c.loan) == 0;
        c.finished = true;
        c.order = order_[c.loan];
      }
    };
  }
  // The loan at (layer, block, publish_step) held, filled with its results and let go.
  void lend(JobBuffers& buffers, JobLoan& loan, int layer, int block, int64_t publish_step, double seed) {
    loan.layer = layer;
    loan.block = block;
    loan.publish_step = publish_step;
    buffers.hold(loan);
    loan.job = results(opt_.blocks(layer)[block].rows, opt_.blocks(layer)[block].cols, seed);
    buffers.let_go(loan);
  }
  static bool parked(const JobLoan& loan) { return loan.job.left_basis.empty(); }

  SecondOrderOptimizer opt_{soap(), {table(), table()}};
  std::filesystem::path dir_;
  std::string path_;
  std::set<const JobLoan*> busy_;
  std::map<const JobLoan*, uint64_t> order_;
};

TEST_F(JobBuffersTest, ParksTheWaitingJobFurthestFromItsPublishStep) {
  ASSERT_GE(opt_.blocks(0).size(), 2u);
  JobBuffers buffers(opt_, test());
  buffers.set_resident_jobs(2, path_);
  std::array<JobLoan, 3> loans;
  lend(buffers, loans[0], 0, 0, 9, 1.5);
  lend(buffers, loans[1], 0, 1, 12, 2.5);
  EXPECT_FALSE(std::filesystem::exists(path_));   // within the budget
  lend(buffers, loans[2], 1, 0, 10, 3.5);          // takes the buffers of loans[1] (step 12)
  EXPECT_FALSE(parked(loans[0]));
  EXPECT_TRUE(parked(loans[1]));
  EXPECT_TRUE(std::filesystem::exists(path_));
  buffers.hold(loans[1]);   // read back into loans[2]'s buffers (step 10 > 9)
  EXPECT_TRUE(parked(loans[2]));
  const MatrixBlock& b = opt_.blocks(0)[1];
  EXPECT_EQ(loans[1].job.left_basis, results(b.rows, b.cols, 2.5).left_basis);
  EXPECT_EQ(loans[1].job.right_basis, results(b.rows, b.cols, 2.5).right_basis);
  EXPECT_EQ(loans[1].job.left_perm, results(b.rows, b.cols, 2.5).left_perm);
  buffers.let_go(loans[1]);
  for (JobLoan& l : loans) buffers.release(l);
}

// Equal publish steps: the first in (layer, block, order), the order the pipeline's walk of its
// queues found them in before the lender kept its own list; lent here in the opposite order.
TEST_F(JobBuffersTest, TiesGoToTheLowestLayerBlockAndOrder) {
  JobBuffers buffers(opt_, test());
  buffers.set_resident_jobs(4, path_);
  std::array<JobLoan, 4> loans;   // in the order they must be parked
  order_ = {{&loans[0], 1}, {&loans[1], 2}, {&loans[2], 1}, {&loans[3], 1}};
  lend(buffers, loans[3], 1, 0, 9, 4);
  lend(buffers, loans[2], 0, 1, 9, 3);
  lend(buffers, loans[1], 0, 0, 9, 2);
  lend(buffers, loans[0], 0, 0, 9, 1);
  for (int resident = 3; resident >= 1; --resident) {
    buffers.set_resident_jobs(resident, path_);   // lowered: one more set freed, its job parked
    for (int i = 0; i < 4; ++i) EXPECT_EQ(parked(loans[i]), i < 4 - resident) << "resident " << resident << ", loan " << i;
  }
  for (JobLoan& l : loans) buffers.release(l);
}

TEST_F(JobBuffersTest, HeldOrBusyJobsAreNeverParked) {
  JobBuffers buffers(opt_, test());
  buffers.set_resident_jobs(1, path_);
  std::array<JobLoan, 3> loans;
  lend(buffers, loans[0], 0, 0, 9, 1);
  busy_.insert(&loans[0]);   // e.g. computing: not waiting
  lend(buffers, loans[1], 0, 1, 10, 2);   // beyond the budget
  EXPECT_FALSE(parked(loans[0]));
  EXPECT_FALSE(std::filesystem::exists(path_));
  buffers.release(loans[1]);   // lent beyond the budget: freed, not kept as a spare
  busy_.clear();
  buffers.hold(loans[0]);      // held: not parked either
  lend(buffers, loans[2], 1, 0, 11, 3);
  EXPECT_FALSE(parked(loans[0]));
  EXPECT_FALSE(std::filesystem::exists(path_));
  buffers.let_go(loans[0]);
  buffers.release(loans[2]);   // beyond the budget again: freed
  loans[1].layer = 1;
  loans[1].block = 1;
  buffers.hold(loans[1]);      // no spare, one set in memory: loans[0] parked now
  EXPECT_TRUE(parked(loans[0]));
  EXPECT_TRUE(std::filesystem::exists(path_));
  buffers.let_go(loans[1]);
  buffers.release(loans[0]);   // parked: its image dropped
  buffers.release(loans[1]);
}

}  // namespace
}  // namespace asteria
