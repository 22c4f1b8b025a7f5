// ShadowPipeline's checkpoint fields (shadow.hpp; core/stateful.hpp). Blocks are keyed by layer
// and their index among the whole layer's blocks (whole_block: a one-rank run's index), so the
// files of several ranks never share a key and any sharding reads them:
//   open.<layer>_<block>.where   [layer, block, publish step, rows, cols, status, left Newton
//                                done, right Newton done]
//   open.<layer>_<block>.{left_root, right_root, left_basis, right_basis, left_perm, right_perm}
//   open.<layer>_<block>.change  (runtime.coherence.tolerance: when computed)
//   kept.<layer>_<block>.where   [layer, block, rows, cols] and its bases and perms (coherence)
// Also the in-memory halves of checkpoints: finish_open_refreshes, kept_versions and their restores.
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "runtime/shadow.hpp"

namespace asteria {

namespace {

std::string block_key(const char* kind, int layer, int whole_block) {
  return std::string(kind) + "." + std::to_string(layer) + "_" + std::to_string(whole_block) + ".";
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

// A refresh job's bases and permutations (open refreshes and kept versions).
void put_bases(StateWriter& out, const std::string& key, const RefreshJob& job) {
  out.put(key + "left_basis", job.left_basis);
  out.put(key + "right_basis", job.right_basis);
  out.put(key + "left_perm", as_doubles(job.left_perm));
  out.put(key + "right_perm", as_doubles(job.right_perm));
}

void get_bases(const StateReader& in, const std::string& key, RefreshJob& job) {
  job.left_basis = in.get(key + "left_basis");
  job.right_basis = in.get(key + "right_basis");
  from_doubles(in.get(key + "left_perm"), job.left_perm);
  from_doubles(in.get(key + "right_perm"), job.right_perm);
}

// The keys "<kind>.<layer>_<block>." of every block the checkpoint has a `kind` of.
std::vector<std::string> saved_keys(const StateReader& in, const char* kind) {
  std::vector<std::string> keys;
  const std::string start = std::string(kind) + ".";
  for (const std::string& f : in.fields(start))
    if (f.size() > 6 && f.compare(f.size() - 6, 6, ".where") == 0) keys.push_back(f.substr(0, f.size() - 5));
  return keys;
}

}  // namespace

std::vector<KeptVersion> ShadowPipeline::kept_versions() const {
  std::vector<KeptVersion> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (int l = 0; l < static_cast<int>(kept_.size()); ++l)
    for (int b = 0; b < static_cast<int>(kept_[l].size()); ++b)
      if (kept_[l][b].rows > 0) out.push_back({l, b, kept_[l][b]});
  return out;
}

void ShadowPipeline::restore_kept_versions(const std::vector<KeptVersion>& kept) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const KeptVersion& k : kept) {
    ASTERIA_CHECK(k.layer >= 0 && k.layer < static_cast<int>(kept_.size()) && k.block >= 0 &&
                      k.block < static_cast<int>(kept_[k.layer].size()),
                  "a kept version of layer ", k.layer, " block ", k.block, " does not exist in this model");
    const BlockPreconditioner& pc = opt_.preconditioner(k.layer, k.block);
    ASTERIA_CHECK(k.version.rows == pc.rows() && k.version.cols == pc.cols() &&
                      k.version.left_basis.size() == static_cast<size_t>(pc.rows() * pc.rows()) &&
                      k.version.right_basis.size() == static_cast<size_t>(pc.cols() * pc.cols()) &&
                      k.version.left_perm.size() == static_cast<size_t>(pc.rows()) &&
                      k.version.right_perm.size() == static_cast<size_t>(pc.cols()),
                  "the kept version of ", pc.name(), " does not fit the block (", pc.rows(), " x ", pc.cols(), ")");
    kept_[k.layer][k.block] = k.version;
  }
}

std::vector<OpenRefresh> ShadowPipeline::finish_open_refreshes() {
  complete_open_refreshes();
  std::vector<SlotPtr> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int l = 0; l < static_cast<int>(queues_.size()); ++l)
      for (int b = 0; b < static_cast<int>(queues_[l].size()); ++b)
        for (const SlotPtr& s : queues_[l][b].slots) {
          ASTERIA_ASSERT(s->state == SlotState::Ready, "an open refresh of ", opt_.blocks(l)[b].name,
                         " is not computed here (with coherence, call prepare_checkpoint first)");
          open.push_back(s);
        }
  }
  // A parked job is read back for its copy (one at a time: the copies are the caller's memory).
  std::vector<OpenRefresh> out;
  for (const SlotPtr& s : open) {
    buffers_.hold(*s);
    out.push_back({s->layer, s->block, s->publish_step, s->job});
    buffers_.let_go(*s);
  }
  return out;
}

void ShadowPipeline::restore_open_refreshes(const std::vector<OpenRefresh>& open) {
  ASTERIA_ASSERT(in_flight() == 0, "open refreshes restored into a pipeline that has some");
  for (const OpenRefresh& r : open) {
    ASTERIA_CHECK(r.layer >= 0 && r.layer < static_cast<int>(queues_.size()) && r.block >= 0 &&
                      r.block < static_cast<int>(queues_[r.layer].size()),
                  "an open refresh of layer ", r.layer, " block ", r.block, " does not exist in this model");
    SlotPtr s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = acquire();
      s->layer = r.layer;
      s->block = r.block;
      s->publish_step = r.publish_step;
      s->opened = r.publish_step - delay_.delay;   // open across a step boundary: not a warm-up one (D = 0)
      s->synced = s->ship = false;
      s->parts_done = opt_.preconditioner(r.layer, r.block).refresh_parts();
      s->state = SlotState::Ready;
      enqueue(s);
    }
    // Into lent buffers: beyond runtime.shadow.resident_jobs the ones restored before are parked.
    buffers_.hold(*s);
    s->job = r.job;
    buffers_.let_go(*s);
  }
}

void ShadowPipeline::save_state(StateWriter& out) {
  for (const OpenRefresh& r : finish_open_refreshes()) {
    const int block = opt_.whole_block(r.layer, r.block);
    const std::string key = block_key("open", r.layer, block);
    out.put(key + "where", {static_cast<double>(r.layer), static_cast<double>(block),
                            static_cast<double>(r.publish_step), static_cast<double>(r.job.rows),
                            static_cast<double>(r.job.cols), static_cast<double>(static_cast<int>(r.job.status)),
                            static_cast<double>(r.job.left_newton_done), static_cast<double>(r.job.right_newton_done)});
    out.put(key + "left_root", r.job.left_root);
    out.put(key + "right_root", r.job.right_root);
    put_bases(out, key, r.job);
    if (r.job.change >= 0) out.put(key + "change", r.job.change);   // runtime.coherence.tolerance
  }
  // The versions the owners dropped and continue from (kept_versions): only with replicas.
  if (!coherence_) return;
  for (const KeptVersion& k : kept_versions()) {
    const int block = opt_.whole_block(k.layer, k.block);
    const std::string key = block_key("kept", k.layer, block);
    out.put(key + "where", {static_cast<double>(k.layer), static_cast<double>(block),
                            static_cast<double>(k.version.rows), static_cast<double>(k.version.cols)});
    put_bases(out, key, k.version);
  }
}

void ShadowPipeline::load_state(const StateReader& in) {
  std::vector<OpenRefresh> open;
  for (const std::string& key : saved_keys(in, "open")) {
    const std::vector<double>& w = in.get(key + "where", 8);
    OpenRefresh r;
    r.layer = static_cast<int>(w[0]);
    r.block = opt_.own_block(r.layer, static_cast<int>(w[1]));
    if (r.block < 0) continue;   // another rank's block (a sharded run)
    r.publish_step = static_cast<int64_t>(w[2]);
    r.job.rows = static_cast<int64_t>(w[3]);
    r.job.cols = static_cast<int64_t>(w[4]);
    r.job.status = static_cast<matfn::Status>(static_cast<int>(w[5]));
    r.job.left_newton_done = w[6] != 0;
    r.job.right_newton_done = w[7] != 0;
    r.job.left_root = in.get(key + "left_root");
    r.job.right_root = in.get(key + "right_root");
    get_bases(in, key, r.job);
    if (in.has(key + "change")) r.job.change = in.scalar(key + "change");
    open.push_back(std::move(r));
  }
  // Kept versions matter only where versions are dropped (with replicas); elsewhere the next
  // refresh starts from the installed state, as every refresh does there.
  std::vector<KeptVersion> kept;
  if (coherence_)
    for (const std::string& key : saved_keys(in, "kept")) {
      const std::vector<double>& w = in.get(key + "where", 4);
      KeptVersion k;
      k.layer = static_cast<int>(w[0]);
      k.block = opt_.own_block(k.layer, static_cast<int>(w[1]));
      if (k.block < 0) continue;
      k.version.rows = static_cast<int64_t>(w[2]);
      k.version.cols = static_cast<int64_t>(w[3]);
      get_bases(in, key, k.version);
      kept.push_back(std::move(k));
    }
  restore_open_refreshes(open);
  restore_kept_versions(kept);
}

void ShadowPipeline::name_registry_blocks() {
  if (!coherence_) return;
  std::vector<std::string> names(static_cast<size_t>(coherence_->registry().blocks()));
  for (int l = 0; l < opt_.num_layers(); ++l)
    for (int b = 0; b < static_cast<int>(opt_.blocks(l).size()); ++b)
      names.at(static_cast<size_t>(coherence_->index(l, b))) = std::to_string(l) + "_" + std::to_string(opt_.whole_block(l, b));
  coherence_->registry().name_blocks(std::move(names));
}

void NoShadowPipeline::load_state(const StateReader& in) {
  if (!in.fields("open.").empty()) in.fail("holds refreshes in flight of runtime.mode asteria; resume it in asteria mode");
}

std::vector<Stateful*> shadow_state_parts(ShadowPipeline* shadow) {
  static NoShadowPipeline none;   // stateless
  if (!shadow) return {&none};
  std::vector<Stateful*> parts = {shadow};
  if (Coherence* c = shadow->coherence()) parts.push_back(&c->registry());
  return parts;
}

}  // namespace asteria
