#include "train/checkpoint/checkpointer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <atomic>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "train/estimates/memory_estimate.hpp"

namespace fs = std::filesystem;

namespace asteria {


struct Checkpointer::Writer {
  std::thread thread;
  std::exception_ptr error;
  std::atomic<bool> done{false};
  double write_s = 0;   // of the finished write, read after join
  size_t bytes = 0;
  void join() {
    if (thread.joinable()) thread.join();
  }
};

Checkpointer::Checkpointer(const Config& cfg, RunParts parts, std::vector<DataFingerprint> data)
    : cfg_(cfg), parts_(parts), data_(std::move(data)), async_(cfg.checkpoint.async),
      writer_(std::make_unique<Writer>()) {}

Checkpointer::~Checkpointer() {
  if (writer_) writer_->join();
}

std::string Checkpointer::root() const { return (fs::path(cfg_.run.dir) / "checkpoints").string(); }

void Checkpointer::lay_out() {
  if (laid_out_) return;
  Model<float>& model = parts_.model;
  // Sharded: this rank's shard of the parameters (row-blocks of cut tensors, as its optimizer
  // state); the other ranks' files hold the rest.
  for (int l = 0; l < model.num_layers(); ++l) {
    ImageBuffer b;
    const ParamTable& t = sharded() ? parts_.sharding->owned_tables()[l] : model.table(l);
    for (const ParamEntry& e : t.entries)
      b.pieces.push_back({state_piece_name("params", e.name), e.shape, e.offset, {}, e.row_offset, e.tensor_rows});
    image_.buffers.push_back(std::move(b));
    sizes_.push_back(t.numel);
  }
  const TierLayout& layout = parts_.tiers.layout();
  for (int l = 0; l < layout.num_layers(); ++l) {
    std::vector<std::vector<StatePiece>> pieces = parts_.optimizer.state_pieces(l);
    ASTERIA_ASSERT(pieces.size() == layout.by_layer[l].size(), "layer ", l, ": ", pieces.size(),
                   " state tensors have pieces, the tier layout has ", layout.by_layer[l].size());
    for (size_t k = 0; k < pieces.size(); ++k) {
      image_.buffers.push_back({std::move(pieces[k]), {}});
      sizes_.push_back(layout.states[layout.by_layer[l][k]].spec.count);
    }
  }
  laid_out_ = true;
}

bool Checkpointer::sharded() const { return parts_.sharding && parts_.sharding->sharded(); }

float* Checkpointer::params(int layer) {
  if (parts_.offloaded) return parts_.offloaded->resident(layer);
  return sharded() ? parts_.sharding->shard_params(layer) : parts_.model.params(layer);
}

void Checkpointer::copy_params_out(int layer, float* dst) {
  if (sizes_[static_cast<size_t>(layer)] == 0) return;   // a layer without parameters (a tied head's) has no buffer
  if (const float* p = params(layer)) {
    std::memcpy(dst, p, sizes_[static_cast<size_t>(layer)] * sizeof(float));
    return;
  }
  parts_.offloaded->copy_out(layer, dst);
}

void Checkpointer::copy_params_in(int layer, const float* src) {
  if (sizes_[static_cast<size_t>(layer)] == 0) return;
  if (float* p = params(layer)) {
    std::memcpy(p, src, sizes_[static_cast<size_t>(layer)] * sizeof(float));
    return;
  }
  parts_.offloaded->copy_in(layer, src);
}

const float* Checkpointer::live(size_t i) {
  const int layers = parts_.model.num_layers();
  if (i < static_cast<size_t>(layers)) {
    if (const float* p = params(static_cast<int>(i))) return p;
    if (scratch_.size() < sizes_[i]) scratch_.resize(sizes_[i]);
    copy_params_out(static_cast<int>(i), scratch_.data());
    return scratch_.data();
  }
  const int id = static_cast<int>(i) - layers;
  if (const float* p = parts_.tiers.memory_of(id)) return p;
  if (scratch_.size() < sizes_[i]) scratch_.resize(sizes_[i]);
  parts_.tiers.copy_out(id, scratch_.data());
  return scratch_.data();
}

void Checkpointer::stage() {
  // One thread: in a plan this runs on the staging lane beside the forward pass, and more
  // threads would take cores from it (the copy is bound by memory bandwidth anyway).
  const int layers = parts_.model.num_layers();
  for (size_t i = 0; i < image_.buffers.size(); ++i) {
    std::vector<float>& dst = image_.buffers[i].data;
    dst.resize(sizes_[i]);   // allocated at the first save only
    if (sizes_[i] == 0) continue;
    if (i < static_cast<size_t>(layers)) {
      copy_params_out(static_cast<int>(i), dst.data());
    } else {
      const int id = static_cast<int>(i) - layers;
      if (const float* src = parts_.tiers.memory_of(id))
        std::memcpy(dst.data(), src, sizes_[i] * sizeof(float));
      else
        parts_.tiers.copy_out(id, dst.data());
    }
  }
}

void Checkpointer::PlanOps::micro_begin(PlanBuilder& b, int micro) {
  copy_op = -1;
  if (!copy_pending || micro != 0) return;
  Op op;
  op.kind = OpKind::CheckpointCopy;
  op.lane = Lane::Staging;
  copy_op = b.add(std::move(op));
}

void Checkpointer::PlanOps::optimizer_begin(PlanBuilder& b) {
  if (copy_op < 0) return;
  Op op;
  op.kind = OpKind::CheckpointWait;
  op.deps = {copy_op};
  b.add(std::move(op));
}

void Checkpointer::bind(Executor& ex) {
  ex.bind(OpKind::CheckpointCopy, [this](const Op&) { copy_and_start_writer(); });
  ex.bind(OpKind::CheckpointWait, [](const Op&) {});   // the executor waited for its dependency
}

void Checkpointer::copy_and_start_writer() {
  plan_ops_.copy_pending = false;
  stage();
  writer_->done = false;
  writer_->thread = std::thread([this] {
    Timer t;
    try {
      if (sharded()) {
        write_rank_file();   // reports its own failure to the group
        shard_write_.write_s = t.seconds();
      } else {
        write_and_commit();
      }
    } catch (...) {
      writer_->error = std::current_exception();
    }
    writer_->done = true;
  });
}

void Checkpointer::capture_values(int64_t step, int64_t tokens, double elapsed_s) {
  auto& v = image_.values;
  v.clear();
  v["train.step"] = {static_cast<double>(step)};
  v["train.tokens"] = {static_cast<double>(tokens)};
  v["train.elapsed_s"] = {elapsed_s};
  save_states(parts_.state, v);
  pending_ = manifest_for(step, tokens, elapsed_s);
}

Manifest Checkpointer::manifest_for(int64_t step, int64_t tokens, double elapsed_s) const {
  Manifest m;
  m.step = step;
  m.tokens = tokens;
  m.world_size = sharded() ? parts_.sharding->group_size() : 1;   // the files: one per writing rank
  m.elapsed_s = elapsed_s;
  m.config = config_to_yaml(cfg_);
  m.config_hash = text_xxh3(m.config);
  m.data = data_;
  return m;
}

void Checkpointer::write_and_commit() {
  Timer t;
  const std::string dir = commit_checkpoint(root(), pending_, [&](const std::string& tmp) {
    write_image((fs::path(tmp) / rank_file_name(0)).string(), image_,
                async_ ? ImageSource() : ImageSource([this](size_t i) { return live(i); }));
    return std::vector<std::string>{rank_file_name(0)};
  });
  size_t bytes = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) bytes += e.file_size();
  apply_retention(root(), cfg_.checkpoint.keep, cfg_.checkpoint.keep_every);
  writer_->write_s = t.seconds();
  writer_->bytes = bytes;
}

void Checkpointer::finish() {
  if (plan_ops_.copy_pending) copy_and_start_writer();   // no step came to copy it
  writer_->join();
  if (shard_write_.pending) {
    writer_->done = false;
    publish_sharded();   // collective: every rank of the group is here too (see the header)
    return;
  }
  if (writer_->done.exchange(false)) {
    times_.write_s = writer_->write_s;
    times_.bytes = writer_->bytes;
  }
  if (writer_->error) {
    std::exception_ptr e = writer_->error;
    writer_->error = nullptr;
    std::rethrow_exception(e);
  }
}

void Checkpointer::save(int64_t step, int64_t tokens, double elapsed_s, bool more_steps) {
  Timer hold;
  finish();   // the previous write, and its error
  lay_out();
  if (!decided_) {
    decided_ = true;
    size_t bytes = 0;
    for (size_t n : sizes_) bytes += n * sizeof(float);
    const double available = static_cast<double>(available_memory_bytes());
    if (async_ && available > 0 && static_cast<double>(bytes) > 0.5 * available) {
      std::fprintf(stderr, "asteria-train: note: checkpoint.async: a copy of the state (%.2f GiB) would take more than "
                   "half the memory available (%.2f GiB); checkpoints are written in the step, from the state itself\n",
                   bytes / 1073741824.0, available / 1073741824.0);
      async_ = false;
    }
  }
  capture_values(step, tokens, elapsed_s);
  if (sharded()) {
    save_sharded(step, more_steps);
    times_.hold_s += hold.seconds();
    return;
  }
  if (async_) {
    plan_ops_.copy_pending = true;
    if (!more_steps) copy_and_start_writer();
  } else {
    try {
      write_and_commit();
    } catch (...) {
      writer_->error = std::current_exception();
    }
    writer_->done = true;
    finish();
  }
  times_.hold_s += hold.seconds();
}

void Checkpointer::save_sharded(int64_t step, bool more_steps) {
  Communicator& group = parts_.sharding->group();
  const std::string what = "the checkpoint of step " + std::to_string(step);
  // 1. The temporary directory, made and named by the group's first rank.
  char tmp[1024] = {};
  if (group.rank() == 0) {
    try {
      const std::string dir = make_checkpoint_tmp(root(), step);
      ASTERIA_CHECK(dir.size() < sizeof tmp, "checkpoint directory name too long: ", dir);
      std::memcpy(tmp, dir.c_str(), dir.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "asteria-train: error: %s\n", e.what());
    }
  }
  Request r = group.broadcast(tmp, sizeof tmp, 0, "broadcast of " + what + "'s directory");
  group.wait(r);
  if (!tmp[0]) fail(what, ": the first rank could not create its directory under ", root());
  shard_write_ = ShardWrite{};
  shard_write_.dir = tmp;
  shard_write_.step = step;
  shard_write_.pending = true;
  Timer t;
  if (async_) {
    // 2. Its file, on the checkpoint thread from the image (copied in the next step); 3. and 4.
    // at the step boundary where every rank has written (see the header).
    plan_ops_.copy_pending = true;
    if (!more_steps) copy_and_start_writer();
    return;
  }
  write_rank_file();
  shard_write_.write_s = t.seconds();
  publish_sharded();
}

void Checkpointer::write_rank_file() {
  // 2. This rank's file, fsynced and checksummed; a failure is reported to the whole group in
  // publish_sharded(), never thrown alone (the others would wait for this rank).
  const std::string file = (fs::path(shard_write_.dir) / rank_file_name(parts_.sharding->group_rank())).string();
  try {
    write_image(file, image_, async_ ? ImageSource() : ImageSource([this](size_t i) { return live(i); }));
    fsync_path(file);
    shard_write_.hash = std::strtoull(file_xxh3(file).c_str(), nullptr, 16);
    shard_write_.bytes = fs::file_size(file);
  } catch (const std::exception& e) {
    shard_write_.error = e.what();
  }
}

void Checkpointer::publish_sharded() {
  Communicator& group = parts_.sharding->group();
  const int me = group.rank(), n = group.size();
  shard_write_.pending = false;
  const std::string what = "the checkpoint of step " + std::to_string(shard_write_.step);
  const std::string& tmp = shard_write_.dir;
  std::string error = shard_write_.error;
  // 3. What every rank wrote, to the first; a failed rank fails them all (nothing is published).
  std::vector<double> table(4 * static_cast<size_t>(n), 0.0);   // per rank: failed, bytes, xxh3 high, low
  table[4 * me] = error.empty() ? 0 : 1;
  table[4 * me + 1] = static_cast<double>(shard_write_.bytes);
  table[4 * me + 2] = static_cast<double>(shard_write_.hash >> 32);
  table[4 * me + 3] = static_cast<double>(shard_write_.hash & 0xffffffffu);
  Request r = group.all_reduce(table.data(), table.size(), "all_reduce of " + what + "'s files");
  group.wait(r);
  for (int k = 0; k < n; ++k)
    if (table[4 * k] != 0) {
      if (me == 0) fs::remove_all(tmp);
      fail(what, ": rank ", k, " of the shard group could not write its file", error.empty() ? "" : ": " + error);
    }
  // 4. The first rank publishes: rename, manifest, retention.
  double published = 1;
  if (me == 0) {
    try {
      Manifest m = pending_;
      for (int k = 0; k < n; ++k) {
        char hex[17];
        const uint64_t h = (static_cast<uint64_t>(table[4 * k + 2]) << 32) | static_cast<uint64_t>(table[4 * k + 3]);
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
        m.files.push_back({rank_file_name(k), static_cast<uint64_t>(table[4 * k + 1]), hex});
      }
      publish_checkpoint(root(), tmp, m);
      apply_retention(root(), cfg_.checkpoint.keep, cfg_.checkpoint.keep_every);
    } catch (const std::exception& e) {
      error = e.what();
      published = 0;
    }
  }
  r = group.broadcast(&published, sizeof published, 0, "broadcast of whether " + what + " was published");
  group.wait(r);
  if (published == 0) fail(what, ": the first rank could not publish it", error.empty() ? "" : ": " + error);
  times_.write_s = shard_write_.write_s;
  times_.bytes = 0;
  for (int k = 0; k < n; ++k) times_.bytes += static_cast<size_t>(table[4 * k + 1]);
}

bool Checkpointer::shard_written() const {
  return shard_write_.pending && !plan_ops_.copy_pending && writer_->done;
}

CheckpointTimes Checkpointer::take_times() {
  // A write that ended since (not a sharded one: its publishing is collective, done at a step
  // boundary every rank of the group agrees on).
  if (!shard_write_.pending && writer_->done && writer_->thread.joinable()) finish();
  CheckpointTimes t = times_;
  times_ = CheckpointTimes{};
  return t;
}

ResumePoint Checkpointer::restore(const std::string& dir) {
  const Manifest m = read_manifest((fs::path(dir) / "manifest.json").string());
  // The rank files in rank order (their tensors are in global form: any world size reads them).
  const std::vector<std::string> files = checkpoint_rank_files(dir, m);
  const std::string& file = files.front();
  verify_files(dir, m);
  lay_out();
  check_image(files, image_);   // every tensor's shape and every value, before anything changes
  const StateReader train(image_.values, "train", file);
  const int64_t step = train.ints("step", 1)[0];
  if (step != m.step) fail(file, ": holds step ", step, ", its manifest says ", m.step);
  // Each component checks the fields it reads before it changes; then the tensors.
  load_states(parts_.state, image_.values, file);
  const int layers = parts_.model.num_layers();
  read_tensors(files, image_, [&](size_t i, const float* data) {
    if (i < static_cast<size_t>(layers))
      copy_params_in(static_cast<int>(i), data);
    else
      parts_.tiers.copy_in(static_cast<int>(i) - layers, data);
  });
  return {step, train.scalar("elapsed_s"), dir};
}

std::string resolve_resume(const Config& cfg) {
  const std::string& r = cfg.checkpoint.resume;
  if (r.empty()) return "";
  if (cfg.checkpoint.resume_latest()) {
    const auto latest = latest_checkpoint((fs::path(cfg.run.dir) / "checkpoints").string());
    return latest ? latest->dir : "";
  }
  if (!fs::is_directory(r)) fail("checkpoint.resume: '", r, "' is not a checkpoint directory");
  return r;
}

}  // namespace asteria
