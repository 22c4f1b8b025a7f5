// The shadow pipeline's job store (runtime/shadow_job_store.hpp): a parked job reads back bit for
// bit (a finished one without its inputs), extents are reused, a damaged file or a full disk is
// an Error naming the file; and the pipeline keeps at most runtime.shadow.resident_jobs jobs in
// memory, its open refreshes the same whether parked or not (checkpoint round trip).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "core/error.hpp"
#include "runtime/shadow.hpp"
#include "runtime/shadow_job_store.hpp"
#include "small_soap.hpp"

namespace asteria {
namespace {

class ShadowJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("asteria-job-store-" + std::to_string(std::random_device{}()));
    path_ = (dir_ / "tiers" / "state.shadow-jobs.bin").string();   // the directory is made on demand
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A job of a rows x cols block with every array filled (values no float rounds to).
  static RefreshJob job(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    auto fill = [&](std::vector<double>& v, int64_t n) {
      v.resize(static_cast<size_t>(n * n));
      for (double& x : v) x = u(rng) / 3.0;
    };
    RefreshJob j;
    j.rows = rows;
    j.cols = cols;
    fill(j.left, rows);
    fill(j.right, cols);
    fill(j.left_basis, rows);
    fill(j.right_basis, cols);
    fill(j.left_carry.m64, rows);
    j.left_carry.m32.assign(5, 0.5f);
    j.left_perm = {2, 0, 1};
    j.right_perm = {1, 0};
    j.installed_left.assign(static_cast<size_t>(rows * rows), -0.25f);
    j.status = matfn::Status::Ok;
    j.change = 0.125;
    return j;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(ShadowJobStoreTest, AParkedJobReadsBackBitForBit) {
  ShadowJobStore store(path_);
  const RefreshJob a = job(700, 600, 1), b = job(17, 5, 2);   // a: 17 MB, three 8 MiB transfers
  ParkedImage pa, pb;
  store.park(a, /*finished=*/false, pa, "w/0");
  store.park(b, /*finished=*/false, pb, "w/1");
  EXPECT_TRUE(std::filesystem::exists(path_));
  EXPECT_EQ(store.bytes_parked(), pa.bytes + pb.bytes);
  // Into buffers of another job (capacity kept), in the other order.
  RefreshJob got = job(4, 4, 9);
  store.unpark(got, pb, "w/1");
  EXPECT_EQ(got.left, b.left);
  EXPECT_EQ(got.right_basis, b.right_basis);
  EXPECT_EQ(got.left_carry.m64, b.left_carry.m64);
  EXPECT_EQ(got.left_carry.m32, b.left_carry.m32);
  EXPECT_EQ(got.left_perm, b.left_perm);
  EXPECT_EQ(got.installed_left, b.installed_left);
  EXPECT_TRUE(got.right_root.empty());
  store.unpark(got, pa, "w/0");
  EXPECT_EQ(got.left, a.left);
  EXPECT_EQ(got.right, a.right);
  EXPECT_EQ(got.left_basis, a.left_basis);
  EXPECT_EQ(got.right_basis, a.right_basis);
  EXPECT_EQ(store.bytes_parked(), 0u);
  EXPECT_EQ(store.bytes_read(), store.bytes_written());
  EXPECT_FALSE(pa.on_disk);
  // The freed extents are used again: the file does not grow.
  const auto size = std::filesystem::file_size(path_);
  store.park(a, false, pa, "w/0");
  EXPECT_EQ(std::filesystem::file_size(path_), size);
}

TEST_F(ShadowJobStoreTest, AFinishedJobKeepsOnlyItsResults) {
  ShadowJobStore store(path_);
  const RefreshJob a = job(64, 32, 3);
  ParkedImage p;
  store.park(a, /*finished=*/true, p, "w/0");
  EXPECT_EQ(p.bytes, ShadowJobStore::image_bytes(a, true));
  EXPECT_LT(p.bytes, ShadowJobStore::image_bytes(a, false) / 2);
  RefreshJob got = job(64, 32, 4);
  store.unpark(got, p, "w/0");
  EXPECT_TRUE(got.left.empty());
  EXPECT_TRUE(got.left_carry.m64.empty());
  EXPECT_EQ(got.left_basis, a.left_basis);
  EXPECT_EQ(got.right_basis, a.right_basis);
  EXPECT_EQ(got.left_perm, a.left_perm);
}

TEST_F(ShadowJobStoreTest, ADamagedFileIsRefusedNamingIt) {
  ShadowJobStore store(path_);
  const RefreshJob a = job(40, 40, 5);
  ParkedImage p;
  store.park(a, false, p, "layer1.w/3");
  {
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(p.offset + 1000));
    f.put('\x5a');
  }
  RefreshJob got;
  try {
    store.unpark(got, p, "layer1.w/3");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer1.w/3"), std::string::npos) << what;
    EXPECT_NE(what.find(path_), std::string::npos) << what;
    EXPECT_NE(what.find("checksum"), std::string::npos) << what;
  }
}

TEST_F(ShadowJobStoreTest, AFullDiskIsAnErrorNamingTheFile) {
  std::filesystem::create_directories(dir_);
  const std::string full = (dir_ / "full.bin").string();
  std::filesystem::create_symlink("/dev/full", full);
  ShadowJobStore store(full);
  ParkedImage p;
  try {
    store.park(job(40, 40, 6), false, p, "w/0");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(full), std::string::npos) << what;
    EXPECT_NE(what.find("full"), std::string::npos) << what;
  }
  EXPECT_FALSE(p.on_disk);
  EXPECT_EQ(store.bytes_parked(), 0u);
}

// A pipeline that keeps one job in memory holds its open refreshes as one that keeps them all:
// restored from a checkpoint (the first parked to make room for the second), they come back
// whole and save the same fields.
TEST_F(ShadowJobStoreTest, OpenRefreshesRoundTripThroughTheDisk) {
  SecondOrderOptimizer opt(testing::small_soap(), {testing::small_table()});
  ShadowPipeline shadow(opt, {.delay = ShadowDelay{2, 0}, .resident_jobs = 1, .jobs_file = path_});
  std::vector<OpenRefresh> open;
  for (int b = 0; b < 2; ++b) {
    OpenRefresh r;
    r.layer = 0;
    r.block = b;
    r.publish_step = 9;
    r.job = job(opt.blocks(0)[b].rows, opt.blocks(0)[b].cols, 10 + b);
    r.job.left.clear();   // a computed job's inputs are not kept
    r.job.right.clear();
    r.job.left_carry = {};
    open.push_back(r);
  }
  shadow.restore_open_refreshes(open);
  EXPECT_TRUE(std::filesystem::exists(path_));   // one was parked
  const std::vector<OpenRefresh> back = shadow.finish_open_refreshes();
  ASSERT_EQ(back.size(), 2u);
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(back[b].job.left_basis, open[b].job.left_basis) << b;
    EXPECT_EQ(back[b].job.right_basis, open[b].job.right_basis) << b;
    EXPECT_EQ(back[b].job.installed_left, open[b].job.installed_left) << b;
    EXPECT_EQ(back[b].job.change, open[b].job.change) << b;
  }
}

}  // namespace
}  // namespace asteria
