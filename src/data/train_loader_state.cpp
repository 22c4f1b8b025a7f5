// TrainLoader's checkpoint fields (loader.hpp; core/stateful.hpp).
#include "data/loader.hpp"

namespace asteria {

void TrainLoader::save_state(StateWriter& out) {
  out.put("position", {static_cast<double>(pos_.epoch), static_cast<double>(pos_.index)});
  out.put("seed", {static_cast<double>(seed_ >> 32), static_cast<double>(seed_ & 0xffffffffu)});
  out.put("instances", static_cast<double>(num_instances_));
}

void TrainLoader::load_state(const StateReader& in) {
  const std::vector<int64_t> pos = in.ints("position", 2);
  const double instances = in.scalar("instances");
  if (static_cast<uint64_t>(instances) != num_instances_)
    in.fail("the loader served ", instances, " instances per epoch, this run has ", num_instances_);
  restore({static_cast<uint64_t>(pos[0]), static_cast<uint64_t>(pos[1])});
}

}  // namespace asteria
