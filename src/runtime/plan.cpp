#include "runtime/plan.hpp"

#include <sstream>

namespace asteria {

const char* to_string(Lane l) {
  switch (l) {
    case Lane::Compute: return "compute";
    case Lane::Comm: return "comm";
    case Lane::Staging: return "staging";
    case Lane::Host: return "host";
  }
  return "?";
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::LoadBatch: return "load_batch";
    case OpKind::Forward: return "forward";
    case OpKind::Backward: return "backward";
    case OpKind::GradNorm: return "grad_norm";
    case OpKind::ClipGrads: return "clip_grads";
    case OpKind::OptimStep: return "optim_step";
    case OpKind::Snapshot: return "snapshot";
    case OpKind::RootJob: return "root_job";
    case OpKind::RootJobBatch: return "root_jobs";
    case OpKind::PublishWait: return "publish_wait";
    case OpKind::TierEvict: return "tier_evict";
    case OpKind::TierPrefetch: return "tier_prefetch";
    case OpKind::TierWait: return "tier_wait";
    case OpKind::CheckpointCopy: return "checkpoint_copy";
    case OpKind::CheckpointWait: return "checkpoint_wait";
    case OpKind::Gather: return "gather";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllReduce: return "all_reduce";
    case OpKind::Release: return "release";
    case OpKind::CoherenceSync: return "coherence_sync";
    case OpKind::Recompute: return "recompute";
    case OpKind::ParamLoad: return "param_load";
    case OpKind::ParamRelease: return "param_release";
    case OpKind::ParamStore: return "param_store";
  }
  return "?";
}

const char* to_string(StateKind k) {
  switch (k) {
    case StateKind::Params: return "params";
    case StateKind::Grads: return "grads";
    case StateKind::Activations: return "act";
    case StateKind::OptimState: return "optim";
    case StateKind::Batch: return "batch";
    case StateKind::Snapshot: return "snapshot";
  }
  return "?";
}

std::string Plan::describe(const std::vector<std::string>& layer_names,
                           const std::function<std::string(const Op&)>& detail) const {
  auto layer_name = [&](int l) {
    return (l >= 0 && l < static_cast<int>(layer_names.size())) ? layer_names[l] : std::string("-");
  };
  auto states = [&](const std::vector<StateRef>& refs) {
    std::string s;
    for (auto& r : refs) {
      if (!s.empty()) s += ",";
      s += to_string(r.kind);
      if (r.layer >= 0) s += "(" + layer_name(r.layer) + ")";
    }
    return s;
  };
  std::ostringstream os;
  os << "plan of step " << step << ": " << ops.size() << " ops, " << micro_batches
     << " micro-batch(es)\n";
  for (const Op& op : ops) {
    char head[96];
    std::snprintf(head, sizeof head, "%4d  %-8s %-13s %-12s", op.id, to_string(op.lane),
                  to_string(op.kind), layer_name(op.layer).c_str());
    os << head;
    if (op.micro >= 0) os << " micro=" << op.micro;
    if (op.block >= 0) os << " block=" << op.block;
    if (!op.blocks.whole()) {
      os << " blocks=" << op.blocks.first << "-";
      if (op.blocks.end < 0) os << "end";
      else os << op.blocks.end;
    }
    if (op.kind == OpKind::RootJob) os << " publish_at=" << op.tag;
    if (!op.deps.empty()) {
      os << " after=";
      for (size_t i = 0; i < op.deps.size(); ++i) os << (i ? "," : "") << op.deps[i];
    }
    if (!op.reads.empty()) os << " reads=" << states(op.reads);
    if (!op.writes.empty()) os << " writes=" << states(op.writes);
    if (detail) {
      const std::string d = detail(op);
      if (!d.empty()) os << "  " << d;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace asteria
