// The shadow pipeline's determinism contract: parameters after every run are bit-identical
// whatever the number of host workers and their speed, and asteria with D = 0 and no stagger is
// bit-identical to native. For Shampoo, SOAP and KL-Shampoo.
#include <gtest/gtest.h>

#include <cstring>

#include "test_util.hpp"
#include "train/config.hpp"
#include "train/trainer.hpp"

using namespace asteria;
using asteria::testing::TempDir;

namespace {

class ShadowDeterminism : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(std::string("shadow-") + GetParam());
    asteria::testing::write_bigram_tokens(dir_->file("train.bin"), 20000, 512, 1);
  }

  // Parameters of all layers after a short run with the given overrides.
  std::vector<float> train(std::vector<std::string> extra) {
    std::vector<std::string> sets = {"data.train=" + dir_->file("train.bin"),
                                     "run.dir=" + dir_->file("run"),
                                     "run.overwrite=true",
                                     "train.steps=14",
                                     "train.micro_batch=4",
                                     "train.warmup_steps=2",
                                     std::string("optim.name=") + GetParam(),
                                     "optim.lr=1e-2",
                                     "optim.precondition_frequency=3",
                                     "optim.start_preconditioning_step=2",
                                     "optim.root_eps=1e-8",
                                     "optim.kl_init_factor=1e-3"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    Config cfg = load_config_text("seed: 5\nmodel:\n  preset: tiny\n  n_layers: 1\n", "shadow.yaml", sets);
    Trainer t(cfg);
    t.run();
    std::vector<float> all;
    for (int l = 0; l < t.num_layers(); ++l) all.insert(all.end(), t.final_params(l).begin(), t.final_params(l).end());
    return all;
  }

  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }

  std::unique_ptr<TempDir> dir_;
};

}  // namespace

TEST_P(ShadowDeterminism, DelayZeroWithoutStaggerEqualsNative) {
  auto native = train({"runtime.mode=native"});
  auto shadow0 = train({"runtime.mode=asteria", "runtime.shadow.delay=0", "runtime.shadow.threads=2"});
  EXPECT_TRUE(same_bits(native, shadow0));
}

TEST_P(ShadowDeterminism, SameBitsWhateverTheWorkersAndTheirSpeed) {
  for (const char* delay : {"runtime.shadow.delay=1", "runtime.shadow.delay=2"}) {
    std::vector<std::string> base = {"runtime.mode=asteria", "runtime.stagger=true", delay};
    auto with = [&](std::vector<std::string> more) {
      auto s = base;
      s.insert(s.end(), more.begin(), more.end());
      return train(s);
    };
    auto one = with({"runtime.shadow.threads=1"});
    auto two_slow = with({"runtime.shadow.threads=2", "runtime.shadow.worker_delay_ms=30"});
    auto four = with({"runtime.shadow.threads=4"});
    auto one_slow = with({"runtime.shadow.threads=1", "runtime.shadow.worker_delay_ms=60"});
    EXPECT_TRUE(same_bits(one, two_slow)) << delay;
    EXPECT_TRUE(same_bits(one, four)) << delay;
    EXPECT_TRUE(same_bits(one, one_slow)) << delay;
    // The delay is real: published later than native, so the parameters differ from native's.
    auto native = train({"runtime.mode=native", "runtime.stagger=true"});
    EXPECT_FALSE(same_bits(one, native)) << delay;
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ShadowDeterminism, ::testing::Values("shampoo", "soap", "kl_shampoo"));
