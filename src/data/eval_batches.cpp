#include <algorithm>

#include "core/error.hpp"
#include "data/loader.hpp"

namespace asteria {

EvalBatches::EvalBatches(const TokenFile& file, int seq_len, int batch, int max_batches)
    : file_(file), seq_len_(seq_len), batch_(batch), count_(0) {
  ASTERIA_CHECK(batch >= 1, "evaluation batch size must be at least 1, got ", batch);
  ASTERIA_CHECK(max_batches >= 1, "evaluation batch count must be at least 1, got ", max_batches);
  const uint64_t instances = count_instances(file, seq_len);
  const uint64_t full_batches = instances / static_cast<uint64_t>(batch);
  if (full_batches == 0)
    fail("token file ", file.path(), " has ", file.size(), " tokens: ", instances,
         " instances of sequence length ", seq_len, ", fewer than one evaluation batch of ", batch,
         " (needs ", static_cast<uint64_t>(batch) * seq_len + 1, " tokens)");
  count_ = static_cast<int>(std::min<uint64_t>(full_batches, static_cast<uint64_t>(max_batches)));
}

void EvalBatches::get(int b, int32_t* inputs, int32_t* targets) const {
  ASTERIA_ASSERT(b >= 0 && b < count_, "evaluation batch ", b, " of ", count_);
  const size_t seq = static_cast<size_t>(seq_len_);
  for (int r = 0; r < batch_; ++r) {
    const size_t instance = static_cast<size_t>(b) * batch_ + r;
    file_.read(instance * seq, seq, inputs + r * seq);
    file_.read(instance * seq + 1, seq, targets + r * seq);
  }
}

}  // namespace asteria
