// Config loading: presets, overrides, every error path names the key and where it came from.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>

#include <yaml-cpp/yaml.h>

#include "core/cuda_visibility.hpp"
#include "core/error.hpp"
#include "runtime/coherence_registry.hpp"
#include "config/config.hpp"
#include "train/estimates/memory_estimate.hpp"
#include "optim/optimizer_factory.hpp"

using namespace asteria;

namespace {

// Runs f, expects an asteria::Error whose message contains every needle.
template <class F>
void expect_error(F&& f, std::initializer_list<const char*> needles) {
  try {
    f();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

const char* kBase = R"(seed: 7
model:
  preset: tiny
optim:
  lr: 0.001
  betas: [0.9, 0.99]
train:
  steps: 20
  micro_batch: 4
run:
  dir: /tmp/x
)";

}  // namespace

TEST(Config, ReadsValuesAndPresetDefaults) {
  Config c = load_config_text(kBase, "base.yaml");
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.model.preset, "tiny");
  EXPECT_EQ(c.model.d_model, 64);
  EXPECT_EQ(c.model.vocab_size, 512);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.001);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.99);
  EXPECT_EQ(c.train.steps, 20);
  EXPECT_EQ(c.train.grad_accum, 1);  // default
}

TEST(Config, PresetCarriesPublishedNumbers) {
  Config c = load_config_text("model:\n  preset: olmo-1b\n", "p.yaml");
  EXPECT_EQ(c.model.d_model, 2048);
  EXPECT_EQ(c.model.n_layers, 16);
  EXPECT_EQ(c.model.n_heads, 16);
  EXPECT_EQ(c.model.mlp_hidden, 8192);
  EXPECT_EQ(c.model.vocab_size, 50280);
  EXPECT_EQ(c.model.embedding_size, 50304);
  EXPECT_TRUE(c.model.tied_embeddings);
  Config c2 = load_config_text("model:\n  preset: olmo2-1b\n", "p.yaml");
  EXPECT_EQ(c2.model.norm, NormKind::RMSNorm);
  EXPECT_EQ(c2.model.norm_placement, NormPlacement::Post);
  EXPECT_TRUE(c2.model.qk_norm);
  EXPECT_EQ(c2.model.embedding_size, 100352);
  EXPECT_DOUBLE_EQ(c2.model.rope_theta, 5e5);
}

TEST(Config, FieldsOverridePreset) {
  Config c = load_config_text("model:\n  preset: olmo-1b\n  n_layers: 3\n", "p.yaml");
  EXPECT_EQ(c.model.n_layers, 3);
  EXPECT_EQ(c.model.d_model, 2048);
}

TEST(Config, DottedOverrides) {
  Config c = load_config_text(kBase, "base.yaml",
                              {"optim.lr=3e-4", "train.grad_accum=4", "optim.betas=[0.8, 0.9]",
                               "model.preset=bench-small", "run.dir=/tmp/y", "data.eval=val.bin"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 3e-4);
  EXPECT_EQ(c.train.grad_accum, 4);
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.8);
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.run.dir, "/tmp/y");
  EXPECT_EQ(c.data.eval, "val.bin");
}

TEST(Config, UnknownKeyNamesKeyFileAndLine) {
  expect_error([] { load_config_text("train:\n  steps: 3\n  stepz: 4\n", "f.yaml"); },
               {"f.yaml:3", "unknown key 'train.stepz'"});
  expect_error([] { load_config_text("trian:\n  steps: 3\n", "f.yaml"); }, {"f.yaml:1", "unknown key 'trian'"});
}

TEST(Config, WrongTypeNamesKey) {
  expect_error([] { load_config_text("train:\n  steps: many\n", "f.yaml"); },
               {"f.yaml:2", "'train.steps' must be an integer", "many"});
  expect_error([] { load_config_text("train:\n  steps: 1.5\n", "f.yaml"); }, {"'train.steps'"});
  expect_error([] { load_config_text("optim:\n  lr: fast\n", "f.yaml"); }, {"'optim.lr' must be a number"});
  expect_error([] { load_config_text("model:\n  qk_norm: 3\n", "f.yaml"); }, {"'model.qk_norm' must be true or false"});
  expect_error([] { load_config_text("optim:\n  betas: 0.9\n", "f.yaml"); }, {"'optim.betas' must be a list of two"});
  expect_error([] { load_config_text("optim: 3\n", "f.yaml"); }, {"section 'optim' must be a mapping"});
}

TEST(Config, OutOfRangeNamesKey) {
  expect_error([] { load_config_text("optim:\n  lr: -1\n", "f.yaml"); }, {"f.yaml:2", "'optim.lr' = -1 is invalid"});
  expect_error([] { load_config_text("optim:\n  betas: [0.9, 1.5]\n", "f.yaml"); }, {"'optim.betas'"});
  expect_error([] { load_config_text("train:\n  micro_batch: 0\n", "f.yaml"); }, {"'train.micro_batch'"});
  expect_error([] { load_config_text("optim:\n  name: lion\n", "f.yaml"); }, {"'optim.name'", "adamw"});
  expect_error([] { load_config_text("model:\n  norm: batchnorm\n", "f.yaml"); }, {"'model.norm'", "rmsnorm"});
  expect_error([] { load_config_text("seed: -3\n", "f.yaml"); }, {"'seed'"});
}

TEST(Config, OverrideErrorsNameTheSetArgument) {
  expect_error([] { load_config_text(kBase, "base.yaml", {"optim.lrr=1"}); },
               {"--set optim.lrr=1", "unknown key 'optim.lrr'"});
  expect_error([] { load_config_text(kBase, "base.yaml", {"train.steps=-5"}); }, {"--set train.steps=-5"});
  expect_error([] { load_config_text(kBase, "base.yaml", {"train.steps"}); }, {"expected KEY=VALUE"});
  expect_error([] { load_config_text(kBase, "base.yaml", {"seed.x=1"}); }, {"'seed' is not a section"});
}

TEST(Config, UnknownPresetAndCrossFieldChecks) {
  expect_error([] { load_config_text("model:\n  preset: gpt5\n", "f.yaml"); },
               {"f.yaml:2", "unknown model preset 'gpt5'", "olmo-1b"});
  expect_error([] { load_config_text("model:\n  d_model: 65\n  n_heads: 2\n", "f.yaml"); }, {"divisible"});
  expect_error([] { load_config_text("model:\n  vocab_size: 600\n  embedding_size: 512\n", "f.yaml"); },
               {"embedding_size"});
  expect_error([] { load_config_text("a: [\n", "f.yaml"); }, {"f.yaml", "invalid YAML"});
  // Staleness above 1 with SOAP: each refresh needs the last one's decision before it starts.
  const std::vector<std::string> stale = {"optim.name=soap", "optim.precondition_frequency=4",
                                          "runtime.coherence.staleness=3", "runtime.shadow.delay=5"};
  expect_error([&] { load_config_text("", "f.yaml", stale); },
               {"f.yaml", "runtime.coherence.staleness 3", "runtime.shadow.delay (5) <= optim.precondition_frequency (4)"});
  EXPECT_NO_THROW(load_config_text("", "f.yaml", {stale[0], stale[1], stale[2], "runtime.shadow.delay=4"}));
}

// runtime.coherence.tolerance unset: the rule's default with staleness above 1, off at 1; an
// explicit value (0 too) wins.
TEST(Config, CoherenceToleranceDefaultsByStaleness) {
  EXPECT_EQ(load_config_text("", "f.yaml").runtime.coherence.tolerance, 0.0);
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.coherence.staleness=5"}).runtime.coherence.tolerance,
            CoherenceRule::kDefaultTolerance);
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.coherence.staleness=5", "runtime.coherence.tolerance=0"})
                .runtime.coherence.tolerance,
            0.0);
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.coherence.tolerance=0.7"}).runtime.coherence.tolerance, 0.7);
  expect_error([] { load_config_text("", "f.yaml", {"runtime.coherence.tolerance=-1"}); }, {"runtime.coherence.tolerance"});
}

// runtime.mode defaults to asteria; runtime.stagger auto: on in asteria mode, off in native (the
// reference schedule); explicit wins.
TEST(Config, StaggerDefaultsByMode) {
  EXPECT_EQ(load_config_text("", "f.yaml").runtime.mode, RuntimeMode::Asteria);
  EXPECT_TRUE(load_config_text("", "f.yaml").runtime.staggered());
  EXPECT_EQ(load_config_text("", "f.yaml").runtime.stagger, Stagger::On);   // resolved
  EXPECT_FALSE(load_config_text("", "f.yaml", {"runtime.stagger=false"}).runtime.staggered());
  EXPECT_FALSE(load_config_text("", "f.yaml", {"runtime.mode=native"}).runtime.staggered());
  EXPECT_EQ(load_config_text("runtime:\n  mode: native\n", "f.yaml").runtime.stagger, Stagger::Off);   // resolved
  EXPECT_TRUE(load_config_text("runtime:\n  mode: native\n  stagger: true\n", "f.yaml").runtime.staggered());
  expect_error([] { load_config_text("runtime:\n  stagger: sometimes\n", "f.yaml"); }, {"f.yaml:2", "runtime.stagger"});
}

// runtime.shadow.lane device (the refreshes by the GPU's solvers) needs the CUDA backend.
TEST(Config, ShadowLaneDeviceNeedsCuda) {
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.backend=cuda", "runtime.shadow.lane=device"}).runtime.shadow.lane,
            ShadowLane::Device);
  expect_error([] { load_config_text("runtime:\n  shadow:\n    lane: device\n", "f.yaml"); },
               {"f.yaml", "runtime.shadow.lane device needs runtime.backend cuda"});
  expect_error([] { load_config_text("runtime:\n  shadow:\n    lane: gpu\n", "f.yaml"); },
               {"f.yaml:3", "runtime.shadow.lane", "device"});
}

// runtime.precision auto: bf16 on the CUDA backend, fp32 on the CPU; bf16 on the CPU when asked.
TEST(Config, PrecisionDefaultsByBackend) {
  EXPECT_EQ(load_config_text("", "f.yaml").runtime.precision, ComputePrecision::Fp32);
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.backend=cuda"}).runtime.precision, ComputePrecision::Bf16);
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.backend=cuda", "runtime.precision=fp32"}).runtime.precision,
            ComputePrecision::Fp32);
  EXPECT_EQ(load_config_text("", "f.yaml", {"runtime.precision=bf16"}).runtime.precision, ComputePrecision::Bf16);
  expect_error([] { load_config_text("runtime:\n  backend: tpu\n", "f.yaml"); }, {"f.yaml:2", "runtime.backend"});
}

TEST(Config, WarmupLongerThanTheRunIsClippedWithANote) {
  Config c = load_config_text("train:\n  steps: 2\n  warmup_steps: 20\n", "f.yaml");
  EXPECT_EQ(c.train.warmup_steps, 2);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("train.warmup_steps 20 exceeds train.steps 2"), std::string::npos) << c.notes[0];
  EXPECT_TRUE(load_config_text(kBase, "base.yaml").notes.empty());
}

TEST(Config, LongValuesAreCutInMessages) {
  const std::string value(5000, 'x');
  try {
    load_config_text(kBase, "base.yaml", {"optim.lr=" + value});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'optim.lr' must be a number"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(5000 characters)"), std::string::npos) << msg;
    EXPECT_LT(msg.size(), 400u) << msg;
  }
  EXPECT_EQ(excerpt("short"), "short");
}

TEST(Config, ResolvedYamlRoundTrips) {
  Config c = load_config_text(kBase, "base.yaml", {"model.z_loss=1e-4", "data.train=a b.bin"});
  std::string y = config_to_yaml(c);
  Config c2 = load_config_text(y, "resolved.yaml");
  EXPECT_EQ(config_to_yaml(c2), y);
  EXPECT_DOUBLE_EQ(c2.model.z_loss, 1e-4);
  EXPECT_EQ(c2.data.train, "a b.bin");
  EXPECT_EQ(c2.model.d_model, c.model.d_model);
}

TEST(Config, FeaturesNotBuiltAreRefused) {
  Config c = load_config_text("optim:\n  name: adamw\n  betas: [0.9, 1.0]\n", "f.yaml");
  expect_error([&] { check_supported(c); }, {"AdamW needs beta2 < 1"});
}

TEST(Config, CheckpointSection) {
  Config c = load_config_text("checkpoint:\n  every: 100\n  keep_every: 1000\n  allow_changes: [optim.lr, train.warmup_steps]\n",
                              "f.yaml");
  EXPECT_EQ(c.checkpoint.every, 100);
  EXPECT_EQ(c.checkpoint.keep, 3);
  EXPECT_EQ(c.checkpoint.keep_every, 1000);
  EXPECT_TRUE(c.checkpoint.async);
  EXPECT_EQ(c.checkpoint.allow_changes, (std::vector<std::string>{"optim.lr", "train.warmup_steps"}));
  EXPECT_EQ(config_to_yaml(load_config_text(config_to_yaml(c), "r.yaml")), config_to_yaml(c));
  expect_error([] { load_config_text("checkpoint:\n  allow_changes: optim.lr\n", "f.yaml"); },
               {"f.yaml:2", "'checkpoint.allow_changes' must be a list of strings"});
}

TEST(Config, OptimizerNameSetsItsDefaults) {
  Config soap = load_config_text("optim:\n  name: soap\n", "f.yaml");
  EXPECT_DOUBLE_EQ(soap.optim.beta1, 0.95);
  EXPECT_DOUBLE_EQ(soap.optim.beta2, 0.95);
  EXPECT_EQ(soap.optim.precondition_frequency, 10);
  EXPECT_DOUBLE_EQ(soap.optim.weight_decay, 0.01);
  Config sh = load_config_text("optim:\n  name: shampoo\n  precondition_frequency: 20\n", "f.yaml");
  EXPECT_DOUBLE_EQ(sh.optim.shampoo_beta, 1.0);
  EXPECT_EQ(sh.optim.precondition_frequency, 20);  // the file overrides the default
  Config kl = load_config_text("optim:\n  name: kl_shampoo\n  adamw_1d:\n    lr: 0.01\n", "f.yaml");
  EXPECT_DOUBLE_EQ(kl.optim.beta2, 0.98);
  EXPECT_DOUBLE_EQ(kl.optim.adamw_1d.lr, 0.01);
  expect_error([] { load_config_text("optim:\n  name: soap\n  adamw_1d:\n    lrr: 1\n", "f.yaml"); },
               {"f.yaml:4", "unknown key 'optim.adamw_1d.lrr'"});
  expect_error([] { load_config_text("optim:\n  name: soap\n  root_method: cholesky\n", "f.yaml"); },
               {"'optim.root_method'", "newton"});
  // The resolved config round-trips with the subsection.
  EXPECT_EQ(config_to_yaml(load_config_text(config_to_yaml(kl), "r.yaml")), config_to_yaml(kl));
}

TEST(Config, RefreshDtypeIsFloat64OrFloat32) {
  // Default float32 for the eigenbases of SOAP and KL-Shampoo (as the SOAP authors compute them),
  // float64 for Shampoo's inverse roots; either reaches the preconditioners.
  for (const char* name : {"soap", "kl_shampoo"}) {
    Config def = load_config_text(std::string("optim:\n  name: ") + name + "\n", "f.yaml");
    EXPECT_EQ(def.optim.refresh_dtype, matfn::Precision::Float32) << name;
    EXPECT_EQ(second_order_params(def.optim).precond.refresh_dtype, matfn::Precision::Float32) << name;
  }
  Config f64 = load_config_text("optim:\n  name: soap\n  refresh_dtype: float64\n", "f.yaml");
  EXPECT_EQ(second_order_params(f64.optim).precond.refresh_dtype, matfn::Precision::Float64);
  Config def = load_config_text("optim:\n  name: shampoo\n", "f.yaml");
  EXPECT_EQ(second_order_params(def.optim).precond.refresh_dtype, matfn::Precision::Float64);
  Config f32 = load_config_text("optim:\n  name: shampoo\n  refresh_dtype: float32\n", "f.yaml");
  EXPECT_EQ(f32.optim.refresh_dtype, matfn::Precision::Float32);
  EXPECT_EQ(second_order_params(f32.optim).precond.refresh_dtype, matfn::Precision::Float32);
  EXPECT_EQ(config_to_yaml(load_config_text(config_to_yaml(f32), "r.yaml")), config_to_yaml(f32));
  expect_error([] { load_config_text("optim:\n  name: soap\n  refresh_dtype: float16\n", "f.yaml"); },
               {"f.yaml:3", "'optim.refresh_dtype'", "float64, float32"});
  expect_error([] { load_config_text("optim:\n  name: soap\n", "f.yaml", {"optim.refresh_dtype=fp32"}); },
               {"--set optim.refresh_dtype=fp32", "'optim.refresh_dtype'", "float64, float32"});
}

TEST(Config, MissingFileIsAnError) {
  expect_error([] { load_config("/nonexistent/cfg.yaml"); }, {"cannot open config file '/nonexistent/cfg.yaml'"});
}

TEST(Config, TierBudgetsAreByteSizes) {
  Config c = load_config_text(kBase, "base.yaml",
                              {"runtime.tiers.device.bytes=1.5GiB", "runtime.tiers.host.bytes=64 MiB",
                               "runtime.tiers.disk.bytes=unlimited", "runtime.tiers.prefetch_distance=3"});
  EXPECT_EQ(parse_byte_size(c.runtime.tiers.device.bytes), 1610612736u);
  EXPECT_EQ(parse_byte_size(c.runtime.tiers.host.bytes), 67108864u);
  EXPECT_EQ(parse_byte_size(c.runtime.tiers.disk.bytes), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(c.runtime.tiers.prefetch_distance, 3);
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("2KB"), 2000u);
  expect_error([] { load_config_text("runtime:\n  tiers:\n    host:\n      bytes: 12 parsecs\n", "f.yaml"); },
               {"f.yaml:4", "runtime.tiers.host.bytes", "12 parsecs"});
  expect_error([] { load_config_text(kBase, "base.yaml", {"runtime.tiers.device.bytes=-1MiB"}); },
               {"--set runtime.tiers.device.bytes=-1MiB"});
  expect_error([] { load_config_text(kBase, "base.yaml", {"runtime.tiers.prefetch_distance=-1"}); },
               {"runtime.tiers.prefetch_distance"});
  expect_error([] { load_config_text(kBase, "base.yaml", {"runtime.tiers.disk.size=1GiB"}); },
               {"unknown key 'runtime.tiers.disk.size'"});
}

// A GPU run's startup check: what one GPU holds (parameters, gradients, the device tier's
// optimizer state, activations) against the device's free bytes; a smaller device tier fits.
TEST(MemoryEstimate, GpuRunIsCheckedAgainstTheDevicesFreeMemory) {
  const std::string olmo = std::string(ASTERIA_SOURCE_DIR) + "/configs/olmo-1b-adamw.yaml";
  const Config all_on_gpu = load_config(olmo, {"runtime.backend=cuda"});
  const Config tiered = load_config(olmo, {"runtime.backend=cuda", "runtime.tiers.device.bytes=4GiB"});
  const MemoryEstimate need = device_memory(all_on_gpu), less = device_memory(tiered);
  // Activations stored as bf16 (runtime.precision auto is bf16 on cuda): 14.74 GiB, not fp32's
  // 22.55; the parameters with the GEMMs' bf16 copy of the weights (2.19 GiB).
  EXPECT_EQ(human_bytes(need.total()), "38.85 GiB");   // 4.38 x 2 + 2.19 + 13.15 + 14.74
  EXPECT_EQ(human_bytes(less.total()), "29.70 GiB");   // 4.38 x 2 + 2.19 + 4 + 14.74
  EXPECT_EQ(less.optimizer, 4.0 * (1ull << 30));
  const uint64_t free_bytes = 32ull << 30;
  expect_error([&] { check_device_memory(all_on_gpu, need, free_bytes, "cuda:0 (NVIDIA H100 80GB HBM3)"); },
               {"olmo-1b-adamw.yaml", "38.85 GiB of memory on cuda:0 (NVIDIA H100 80GB HBM3)", "32.00 GiB free",
                "runtime.tiers.device.bytes", "train.micro_batch"});
  EXPECT_NO_THROW(check_device_memory(tiered, less, free_bytes, "cuda:0"));
}

// The startup memory estimate is --dry-run's, less the optimizer state homed on the disk tier.
TEST(MemoryEstimate, OlmoSoapInMemoryAndThroughTheDiskTier) {
  const std::string olmo = std::string(ASTERIA_SOURCE_DIR) + "/configs/olmo-1b-soap.yaml";
  const MemoryEstimate native = process_memory(load_config(olmo, {"runtime.mode=native"}));
  EXPECT_GT(native.total(), 60.0 * (1ull << 30));   // about 66 GiB: what native mode cannot fit here
  EXPECT_EQ(native.optimizer_on_disk, 0);
  const MemoryEstimate tiered = process_memory(load_config(
      olmo, {"runtime.mode=asteria", "runtime.tiers.device.bytes=7GiB", "runtime.tiers.host.bytes=1GiB"}));
  EXPECT_GT(tiered.optimizer_on_disk, 20.0 * (1ull << 30));
  EXPECT_LT(tiered.optimizer, native.optimizer - 20.0 * (1ull << 30));
  EXPECT_EQ(tiered.params, native.params);
  EXPECT_EQ(tiered.activations, native.activations);
  Config limited = load_config(olmo, {"runtime.memory_limit=20GiB"});
  EXPECT_EQ(memory_limit_bytes(limited, 1), 20ull << 30);
  expect_error([&] { check_memory(limited, native, 1); }, {"olmo-1b-soap.yaml", "needs about", "but may use 20.00 GiB"});
  expect_error([] { load_config_text("runtime:\n  memory_limit: lots\n", "f.yaml"); }, {"f.yaml:2", "runtime.memory_limit"});
}

// Every closed option is an enum read by name: a bad value is refused naming the key, where it
// came from, the value and every choice.
TEST(Config, EveryChoiceRefusesABadValueNamingTheChoices) {
  struct Case {
    const char* section;
    const char* key;
    const char* choices;
  };
  const Case cases[] = {
      {"runtime", "mode", "native, asteria"},
      {"runtime", "backend", "auto, cpu, cuda"},
      {"runtime", "precision", "auto, fp32, bf16"},
      {"runtime", "stagger", "auto, true, false"},
      {"runtime", "blas", "auto, as-is"},
      {"runtime", "placement", "auto, manual"},
      {"distributed", "fsdp", "full, hybrid, none"},
      {"optim", "name", "adamw, shampoo, soap, kl_shampoo"},
      {"optim", "root_method", "eigh, newton"},
      {"optim", "grafting", "adam, none"},
      {"optim", "refresh_dtype", "float64, float32"},
      {"train", "schedule", "cosine, linear, constant"},
      {"train", "activation_recompute", "none, blocks, every_k"},
      {"data", "dtype", "auto, uint16, uint32"},
  };
  for (const Case& c : cases) {
    const std::string key = std::string(c.section) + "." + c.key;
    const std::string in_file = std::string(c.section) + ":\n  " + c.key + ": bogus\n";
    const std::string message = "'" + key + "' = bogus is invalid: it must be one of: " + c.choices;
    expect_error([&] { load_config_text(in_file, "f.yaml"); }, {"f.yaml:2", message.c_str()});
    const std::string set = key + "=bogus";
    expect_error([&] { load_config_text("", "f.yaml", {set}); }, {("--set " + set).c_str(), message.c_str()});
  }
  expect_error([] { load_config_text("runtime:\n  shadow:\n    lane: bogus\n", "f.yaml"); },
               {"f.yaml:3", "'runtime.shadow.lane' = bogus is invalid: it must be one of: auto, workers, compute, device"});
}

// Each choice is read to its enum and written back under the same name, "quoted" as when the
// options were strings (the resolved config's text is unchanged).
TEST(Config, ChoicesReadToTheirEnumsAndWriteBackTheSameText) {
  const Config c = load_config_text("", "f.yaml",
                                    {"runtime.mode=native", "runtime.backend=cuda", "runtime.precision=fp32",
                                     "runtime.stagger=true", "runtime.blas=as-is", "runtime.shadow.lane=device",
                                     "distributed.fsdp=hybrid", "optim.name=shampoo", "optim.root_method=newton",
                                     "optim.grafting=none", "optim.refresh_dtype=float32", "train.schedule=linear",
                                     "train.activation_recompute=every_k", "train.recompute_every_k=3",
                                     "data.dtype=uint32"});
  EXPECT_EQ(c.runtime.mode, RuntimeMode::Native);   // (asteria is the default)
  EXPECT_EQ(c.runtime.backend, BackendKind::Cuda);
  EXPECT_EQ(c.runtime.precision, ComputePrecision::Fp32);
  EXPECT_EQ(c.runtime.stagger, Stagger::On);
  EXPECT_EQ(c.runtime.blas, BlasKernels::AsIs);
  EXPECT_EQ(c.runtime.shadow.lane, ShadowLane::Device);
  EXPECT_EQ(c.distributed.fsdp, FsdpMode::Hybrid);
  EXPECT_EQ(c.optim.name, OptimizerKind::Shampoo);
  EXPECT_EQ(c.optim.root_method, RootMethod::Newton);
  EXPECT_EQ(c.optim.grafting, Grafting::None);
  EXPECT_EQ(c.optim.refresh_dtype, matfn::Precision::Float32);
  EXPECT_EQ(c.train.schedule, ScheduleKind::Linear);
  EXPECT_EQ(c.train.activation_recompute, ActivationRecompute::Mode::EveryK);
  EXPECT_EQ(c.train.recompute().every_k, 3);
  EXPECT_EQ(c.data.dtype, TokenDtypeChoice::U32);
  const std::string y = config_to_yaml(c);
  for (const char* line : {"  mode: \"native\"\n", "  backend: \"cuda\"\n", "  precision: \"fp32\"\n",
                           "  stagger: \"true\"\n", "  blas: \"as-is\"\n", "    lane: \"device\"\n",
                           "  fsdp: \"hybrid\"\n", "  name: \"shampoo\"\n", "  root_method: \"newton\"\n",
                           "  grafting: \"none\"\n", "  refresh_dtype: \"float32\"\n", "  schedule: \"linear\"\n",
                           "  activation_recompute: \"every_k\"\n", "  recompute_every_k: 3\n", "  dtype: \"uint32\"\n"})
    EXPECT_NE(y.find(line), std::string::npos) << line << " not in:\n" << y;
  EXPECT_EQ(config_to_yaml(load_config_text(y, "r.yaml")), y);
  // A message names a choice by the name it is written with.
  EXPECT_STREQ(to_string(Stagger::On), "true");
  EXPECT_STREQ(to_string(BlasKernels::AsIs), "as-is");
  EXPECT_STREQ(to_string(OptimizerKind::KlShampoo), "kl_shampoo");
}

// "checkpoint" means a saved run only: train.activation_checkpointing / checkpoint_every_k are
// now train.activation_recompute / recompute_every_k. The old keys (older configs, --set lines,
// the configs saved in older checkpoints) are still read, each with a note naming the new key.
TEST(Config, OldActivationCheckpointingKeysAreReadWithANote) {
  const Config file = load_config_text("train:\n  activation_checkpointing: every_k\n  checkpoint_every_k: 3\n", "f.yaml");
  EXPECT_EQ(file.train.activation_recompute, ActivationRecompute::Mode::EveryK);
  EXPECT_EQ(file.train.recompute_every_k, 3);
  ASSERT_EQ(file.notes.size(), 2u);
  EXPECT_NE(file.notes[0].find("f.yaml:2: train.activation_checkpointing is now train.activation_recompute"),
            std::string::npos) << file.notes[0];
  EXPECT_NE(file.notes[1].find("f.yaml:3: train.checkpoint_every_k is now train.recompute_every_k"),
            std::string::npos) << file.notes[1];
  // Written under the new keys only.
  const std::string y = config_to_yaml(file);
  EXPECT_EQ(y.find("checkpointing"), std::string::npos) << y;
  EXPECT_EQ(y.find("checkpoint_every_k"), std::string::npos) << y;

  const Config set = load_config_text("train:\n  activation_recompute: blocks\n", "f.yaml",
                                      {"train.activation_checkpointing=none"});
  EXPECT_EQ(set.train.activation_recompute, ActivationRecompute::Mode::None);   // the --set wins
  ASSERT_EQ(set.notes.size(), 1u);
  EXPECT_NE(set.notes[0].find("--set train.activation_checkpointing=none: train.activation_checkpointing is now "
                              "train.activation_recompute"),
            std::string::npos) << set.notes[0];
  expect_error([] { load_config_text("", "f.yaml", {"train.activation_checkpointing=some"}); },
               {"--set train.activation_checkpointing=some", "'train.activation_recompute' = some is invalid"});
  expect_error([] { load_config_text("train:\n  activation_checkpointing: blocks\n  activation_recompute: none\n", "f.yaml"); },
               {"f.yaml:2", "'train.activation_checkpointing' is the old name of 'train.activation_recompute'"});
  EXPECT_TRUE(load_config_text("train:\n  activation_recompute: blocks\n", "f.yaml").notes.empty());
}

// runtime.backend auto resolves when the config loads, with the reason for the startup line;
// this machine has no GPU (CI's kind), so it is the CPU here.
TEST(Config, BackendAutoResolvesWithItsReason) {
  const Config c = load_config_text("", "f.yaml");
  std::string why;
  const bool gpu = cuda_device_visible_here(&why);
  EXPECT_EQ(c.runtime.backend, gpu ? BackendKind::Cuda : BackendKind::Cpu);
  EXPECT_NE(c.backend_choice.find("runtime.backend auto: "), std::string::npos) << c.backend_choice;
  EXPECT_NE(c.backend_choice.find(why), std::string::npos) << c.backend_choice;
  EXPECT_TRUE(load_config_text("", "f.yaml", {"runtime.backend=cpu"}).backend_choice.empty());
  // Written resolved: read back, it names the backend.
  EXPECT_EQ(load_config_text(config_to_yaml(c), "again.yaml").runtime.backend, c.runtime.backend);
}

// Placement's "explicit keys override": the keys the file and --set gave are known.
TEST(Config, TheGivenKeysAreKnown) {
  const Config c = load_config_text("train:\n  micro_batch: 2\nruntime:\n  tiers:\n    device:\n      bytes: 1GiB\n", "f.yaml",
                                    {"model.head_chunk=64"});
  EXPECT_TRUE(c.was_given("train.micro_batch"));
  EXPECT_TRUE(c.was_given("runtime.tiers.device.bytes"));
  EXPECT_TRUE(c.was_given("runtime.tiers"));   // a section: some key under it
  EXPECT_TRUE(c.was_given("model.head_chunk"));
  EXPECT_FALSE(c.was_given("runtime.tiers.host.bytes"));
  EXPECT_FALSE(c.was_given("train.micro"));    // whole names only
  EXPECT_FALSE(c.was_given("train.grad_accum"));
}

// Every key of the resolved config declares what a resume may do with it (a new key cannot
// compile without one: the schema's calls take it), and the adoption of a checkpoint's values.
TEST(ResumePolicy, EveryKeyOfTheConfigDeclaresOne) {
  const std::map<std::string, OnResume>& policies = resume_policies();
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n, const std::string& key) {
    if (!n.IsMap()) {
      EXPECT_TRUE(policies.count(key)) << key << " has no resume policy";
      return;
    }
    for (auto it = n.begin(); it != n.end(); ++it)
      walk(it->second, key.empty() ? it->first.Scalar() : key + "." + it->first.Scalar());
  };
  const Config defaults;
  walk(YAML::Load(config_to_yaml(defaults)), "");
  EXPECT_EQ(policies.at("seed"), OnResume::Fixed);
  EXPECT_EQ(policies.at("optim.lr"), OnResume::Fixed);
  EXPECT_EQ(policies.at("train.micro_batch"), OnResume::Placement);
  EXPECT_EQ(policies.at("runtime.tiers.device.bytes"), OnResume::Free);
  EXPECT_EQ(policies.at("runtime.memory_limit"), OnResume::Free);
  EXPECT_EQ(policies.at("runtime.shadow.resident_jobs"), OnResume::Free);
}

TEST(ResumePolicy, FixedKeysTheConfigDoesNotGiveTakeTheCheckpointsValues) {
  // The checkpoint's run: another delay (placement's), another refresh dtype (an older default).
  const Config saved = load_config_text(kBase, "base.yaml",
                                        {"runtime.shadow.delay=2", "optim.refresh_dtype=float64", "seed=9"});
  Config now = load_config_text(kBase, "base.yaml", {"optim.lr=0.002"});
  const std::vector<std::string> kept = adopt_checkpoint_config(now, saved);
  EXPECT_EQ(now.runtime.shadow.delay, 2);
  EXPECT_EQ(now.optim.refresh_dtype, saved.optim.refresh_dtype);
  EXPECT_EQ(now.seed, 7u);                 // given by the file: kept (and refused by the resume check)
  EXPECT_DOUBLE_EQ(now.optim.lr, 0.002);   // given: kept
  EXPECT_TRUE(now.was_given("runtime.shadow.delay"));   // placement keeps it now
  std::string all;
  for (const std::string& k : kept) all += k + "\n";
  EXPECT_NE(all.find("runtime.shadow.delay: 2 (this config: 3)"), std::string::npos) << all;
  EXPECT_EQ(all.find("optim.lr"), std::string::npos) << all;
  EXPECT_EQ(all.find("train.micro_batch"), std::string::npos) << all;   // not fixed: placement's to choose
}
