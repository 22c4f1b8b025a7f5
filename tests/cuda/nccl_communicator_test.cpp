// The NCCL communicator (comm/nccl_communicator.hpp) on one rank, bootstrapped by the local
// communicator: every collective's result against what the contract says it is on one rank
// (exact: nothing is summed with another rank). Several ranks need a GPU each (NCCL refuses two
// ranks on one device); this machine class has one, so the multi-rank comparison with MPI
// waits for a multi-GPU machine. Skipped without a device.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "device_fixture.hpp"
#include "comm/nccl_communicator.hpp"

namespace asteria {
namespace {

class NcclOneRank : public testing::OnDevice {
 protected:
  void SetUp() override {
    OnDevice::SetUp();
    if (IsSkipped()) return;
    local_ = make_local_communicator();
    nccl_ = make_nccl_communicator(*local_, 0);
  }
  std::unique_ptr<Communicator> local_, nccl_;
};

TEST_F(NcclOneRank, CollectivesFollowTheContract) {
  EXPECT_EQ(nccl_->rank(), 0);
  EXPECT_EQ(nccl_->size(), 1);
  EXPECT_EQ(nccl_->kind(), "nccl");
  std::vector<float> a(1000);
  std::iota(a.begin(), a.end(), 1.0f);
  float* src = up(a);
  float* dst = up(std::vector<float>(a.size(), 0.0f));
  Request r = nccl_->all_gather(src, a.size(), dst, "all_gather test");
  nccl_->wait(r);
  EXPECT_EQ(down(dst, a.size()), a);
  float* dst2 = up(std::vector<float>(a.size(), 0.0f));
  r = nccl_->reduce_scatter(src, dst2, a.size(), "reduce_scatter test");
  nccl_->wait(r);
  EXPECT_EQ(down(dst2, a.size()), a);
  r = nccl_->all_reduce(src, a.size(), "all_reduce test");
  nccl_->wait(r);
  EXPECT_EQ(down(src, a.size()), a);
  const std::vector<int> counts = {static_cast<int>(a.size())}, offsets = {0};
  r = nccl_->all_gatherv(src, counts, offsets, "all_gatherv test");
  nccl_->wait(r);
  EXPECT_EQ(down(src, a.size()), a);
  float* dst3 = up(std::vector<float>(a.size(), 0.0f));
  r = nccl_->reduce_scatterv(src, dst3, counts, "reduce_scatterv test");
  nccl_->wait(r);
  EXPECT_EQ(down(dst3, a.size()), a);
  std::vector<double> d = {1.5, -2.25};
  double* dd = up(d);
  r = nccl_->all_reduce(dd, d.size(), "all_reduce double test");
  nccl_->wait(r);
  EXPECT_EQ(down(dd, d.size()), d);
  nccl_->barrier("barrier test");
  auto half = nccl_->split(0, 0);
  EXPECT_EQ(half->size(), 1);
  EXPECT_EQ(half->kind(), "nccl");
}

}  // namespace
}  // namespace asteria
