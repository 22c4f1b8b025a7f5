#include "core/error.hpp"
#include "data/loader.hpp"

namespace asteria {

TrainLoader::TrainLoader(const TokenFile& file, int seq_len, uint64_t seed)
    : file_(file),
      seq_len_(seq_len),
      seed_(seed),
      num_instances_(count_instances(file, seq_len)),
      order_(epoch_permutation(num_instances_, seed, 0)) {}

void TrainLoader::next_batch(int batch, int32_t* inputs, int32_t* targets, int rank, int world) {
  ASTERIA_CHECK(batch >= 1, "batch size must be at least 1, got ", batch);
  ASTERIA_ASSERT(world >= 1 && rank >= 0 && rank < world);
  for (int g = 0; g < batch * world; ++g) {
    // The rollover happens when the next instance is needed, not after the last one is served,
    // so position() of a finished epoch reads (epoch, num_instances) and restores to the same.
    if (pos_.index == num_instances_) {
      pos_ = LoaderPosition{pos_.epoch + 1, 0};
      order_ = epoch_permutation(num_instances_, seed_, pos_.epoch);
    }
    if (g % world == rank) {
      const size_t row = static_cast<size_t>(g / world) * static_cast<size_t>(seq_len_);
      load_instance(order_[pos_.index], inputs + row, targets + row);
    }
    ++pos_.index;
  }
}

void TrainLoader::restore(const LoaderPosition& pos) {
  if (pos.index > num_instances_)
    fail("cannot restore the loader of ", file_.path(), " to epoch ", pos.epoch, " index ",
         pos.index, ": an epoch has only ", num_instances_, " instances (sequence length ",
         seq_len_, "); was the checkpoint made with other data or another sequence length?");
  if (pos.epoch != pos_.epoch) order_ = epoch_permutation(num_instances_, seed_, pos.epoch);
  pos_ = pos;
}

void TrainLoader::load_instance(uint64_t instance, int32_t* inputs, int32_t* targets) const {
  const size_t begin = static_cast<size_t>(instance) * static_cast<size_t>(seq_len_);
  file_.read(begin, static_cast<size_t>(seq_len_), inputs);
  file_.read(begin + 1, static_cast<size_t>(seq_len_), targets);
}

}  // namespace asteria
