#include "train/checkpointer.hpp"

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <atomic>
#include <thread>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "optim/blocks.hpp"
#include "optim/second_order.hpp"
#include "train/checkpoint_store.hpp"

namespace fs = std::filesystem;

namespace asteria {

namespace {

constexpr const char* kRankFile = "rank00000.h5";   // one rank until the multi-rank issue

// Value names cannot hold '/', which separates HDF5 groups.
std::string value_key(std::string name) {
  for (char& c : name)
    if (c == '/') c = ':';
  return name;
}

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  return {v.begin(), v.end()};
}

template <class T>
void from_doubles(const std::vector<double>& v, std::vector<T>& out) {
  out.assign(v.size(), T{});
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<T>(v[i]);
}

// MemAvailable of /proc/meminfo, or 0 when unknown.
double available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib * 1024.0;
}

}  // namespace

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
  for (int l = 0; l < model.num_layers(); ++l) {
    ImageBuffer b;
    for (const ParamEntry& e : model.table(l).entries)
      b.pieces.push_back({state_piece_name("params", e.name), e.shape, e.offset, {}});
    image_.buffers.push_back(std::move(b));
    sizes_.push_back(model.table(l).numel);
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

// Open refreshes are stored by the block's index among the whole layer's blocks (its index in a
// one-rank run), so any sharding reads them; a sharded rank's optimizer numbers its own blocks.
int Checkpointer::global_block(int layer, int local) const {
  const auto& so = dynamic_cast<const SecondOrderOptimizer&>(parts_.optimizer);
  const MatrixBlock& b = so.blocks(layer)[local];
  const ParamTable& whole = parts_.model.table(layer);
  const std::vector<MatrixBlock> all =
      layer_blocks(layer, whole, cfg_.optim.max_preconditioner_dim, cfg_.optim.precondition_embeddings);
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].row0 == b.row0 && all[i].col0 == b.col0 && whole.entries[all[i].entry].name == so.entry_name(layer, b.entry))
      return static_cast<int>(i);
  ASTERIA_ASSERT(false, "block ", b.name, " is not a block of layer ", layer);
  return -1;
}

int Checkpointer::local_block(int layer, int global) const {
  const auto& so = dynamic_cast<const SecondOrderOptimizer&>(parts_.optimizer);
  const std::vector<MatrixBlock>& mine = so.blocks(layer);
  for (int i = 0; i < static_cast<int>(mine.size()); ++i)
    if (global_block(layer, i) == global) return i;
  return -1;
}

const float* Checkpointer::live(size_t i) {
  const int layers = parts_.model.num_layers();
  if (i < static_cast<size_t>(layers)) return parts_.model.params(static_cast<int>(i));
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
      std::memcpy(dst.data(), parts_.model.params(static_cast<int>(i)), sizes_[i] * sizeof(float));
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
  writer_->thread = std::thread([this] {
    try {
      write_and_commit();
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
  const LoaderPosition pos = parts_.loader.position();
  v["loader.position"] = {static_cast<double>(pos.epoch), static_cast<double>(pos.index)};
  v["loader.seed"] = {static_cast<double>(cfg_.seed >> 32), static_cast<double>(cfg_.seed & 0xffffffffu)};
  v["loader.instances"] = {static_cast<double>(parts_.loader.num_instances())};
  for (const OptimizerCounters& c : parts_.optimizer.counters()) v["optim.counters." + value_key(c.name)] = as_doubles(c.values);
  if (parts_.shadow) {
    const std::vector<OpenRefresh> open = parts_.shadow->finish_open_refreshes();
    v["shadow.open.count"] = {static_cast<double>(open.size())};
    for (size_t k = 0; k < open.size(); ++k) {
      const OpenRefresh& r = open[k];
      const std::string key = "shadow.open." + std::to_string(k) + ".";
      v[key + "where"] = {static_cast<double>(r.layer),    static_cast<double>(global_block(r.layer, r.block)),
                          static_cast<double>(r.publish_step), static_cast<double>(r.job.rows),
                          static_cast<double>(r.job.cols), static_cast<double>(static_cast<int>(r.job.status)),
                          static_cast<double>(r.job.left_newton_done), static_cast<double>(r.job.right_newton_done)};
      v[key + "left_root"] = r.job.left_root;
      v[key + "right_root"] = r.job.right_root;
      v[key + "left_basis"] = r.job.left_basis;
      v[key + "right_basis"] = r.job.right_basis;
      v[key + "left_perm"] = as_doubles(r.job.left_perm);
      v[key + "right_perm"] = as_doubles(r.job.right_perm);
    }
  }
  pending_ = manifest_for(step, tokens, elapsed_s);
}

Manifest Checkpointer::manifest_for(int64_t step, int64_t tokens, double elapsed_s) const {
  Manifest m;
  m.step = step;
  m.tokens = tokens;
  m.world_size = 1;
  m.elapsed_s = elapsed_s;
  m.config = config_to_yaml(cfg_);
  m.config_hash = text_xxh3(m.config);
  m.data = data_;
  return m;
}

void Checkpointer::write_and_commit() {
  Timer t;
  const std::string dir = commit_checkpoint(root(), pending_, [&](const std::string& tmp) {
    write_image((fs::path(tmp) / kRankFile).string(), image_,
                async_ ? ImageSource() : ImageSource([this](size_t i) { return live(i); }));
    return std::vector<std::string>{kRankFile};
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
    const double available = available_memory_bytes();
    if (async_ && available > 0 && static_cast<double>(bytes) > 0.5 * available) {
      std::fprintf(stderr, "asteria-train: note: checkpoint.async: a copy of the state (%.2f GiB) would take more than "
                   "half the memory available (%.2f GiB); checkpoints are written in the step, from the state itself\n",
                   bytes / 1073741824.0, available / 1073741824.0);
      async_ = false;
    }
  }
  capture_values(step, tokens, elapsed_s);
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

CheckpointTimes Checkpointer::take_times() {
  if (writer_->done && writer_->thread.joinable()) finish();   // a write that ended since
  CheckpointTimes t = times_;
  times_ = CheckpointTimes{};
  return t;
}

ResumePoint Checkpointer::restore(const std::string& dir) {
  const std::string file = (fs::path(dir) / kRankFile).string();
  const Manifest m = read_manifest((fs::path(dir) / "manifest.json").string());
  if (m.world_size != 1)
    fail(dir, ": written by ", m.world_size, " ranks; loading at another world size comes with multi-rank training");
  verify_files(dir, m);
  lay_out();
  check_image(file, image_);   // every tensor's shape and every value, before anything changes
  const auto value = [&](const std::string& name, size_t n) -> const std::vector<double>& {
    return image_value(image_, name, n, file);
  };
  const int64_t step = static_cast<int64_t>(value("train.step", 1)[0]);
  if (step != m.step) fail(file, ": holds step ", step, ", its manifest says ", m.step);
  const std::vector<double>& pos = value("loader.position", 2);
  if (static_cast<uint64_t>(value("loader.instances", 1)[0]) != parts_.loader.num_instances())
    fail(file, ": the loader served ", value("loader.instances", 1)[0], " instances per epoch, this run has ",
         parts_.loader.num_instances());
  std::vector<OptimizerCounters> counters;
  for (const auto& [name, vals] : image_.values)
    if (name.rfind("optim.counters.", 0) == 0) {
      std::string key = name.substr(15);
      for (char& c : key)
        if (c == ':') c = '/';
      counters.push_back({key, {vals.begin(), vals.end()}});
    }
  std::vector<OpenRefresh> open;
  if (parts_.shadow) {
    const size_t n = static_cast<size_t>(value("shadow.open.count", 1)[0]);
    for (size_t k = 0; k < n; ++k) {
      const std::string key = "shadow.open." + std::to_string(k) + ".";
      const std::vector<double>& w = value(key + "where", 8);
      OpenRefresh r;
      r.layer = static_cast<int>(w[0]);
      r.block = local_block(r.layer, static_cast<int>(w[1]));
      if (r.block < 0) continue;   // another rank's block (a sharded run)
      r.publish_step = static_cast<int64_t>(w[2]);
      r.job.rows = static_cast<int64_t>(w[3]);
      r.job.cols = static_cast<int64_t>(w[4]);
      r.job.status = static_cast<matfn::Status>(static_cast<int>(w[5]));
      r.job.left_newton_done = w[6] != 0;
      r.job.right_newton_done = w[7] != 0;
      r.job.left_root = value(key + "left_root", 0);
      r.job.right_root = value(key + "right_root", 0);
      r.job.left_basis = value(key + "left_basis", 0);
      r.job.right_basis = value(key + "right_basis", 0);
      from_doubles(value(key + "left_perm", 0), r.job.left_perm);
      from_doubles(value(key + "right_perm", 0), r.job.right_perm);
      open.push_back(std::move(r));
    }
  } else if (image_.values.count("shadow.open.count") && value("shadow.open.count", 1)[0] > 0) {
    fail(file, ": holds refreshes in flight of runtime.mode asteria; resume it in asteria mode");
  }
  // Everything checked: now the run changes.
  parts_.optimizer.restore_counters(counters);
  const int layers = parts_.model.num_layers();
  read_tensors(file, image_, [&](size_t i, const float* data) {
    if (i < static_cast<size_t>(layers))
      std::memcpy(parts_.model.params(static_cast<int>(i)), data, sizes_[i] * sizeof(float));
    else
      parts_.tiers.copy_in(static_cast<int>(i) - layers, data);
  });
  parts_.loader.restore({static_cast<uint64_t>(pos[0]), static_cast<uint64_t>(pos[1])});
  if (parts_.shadow) parts_.shadow->restore_open_refreshes(open);
  return {step, value("train.elapsed_s", 1)[0], dir};
}

std::string resolve_resume(const Config& cfg) {
  const std::string& r = cfg.checkpoint.resume;
  if (r.empty()) return "";
  if (r == "latest") {
    const auto latest = latest_checkpoint((fs::path(cfg.run.dir) / "checkpoints").string());
    return latest ? latest->dir : "";
  }
  if (!fs::is_directory(r)) fail("checkpoint.resume: '", r, "' is not a checkpoint directory");
  return r;
}

}  // namespace asteria
