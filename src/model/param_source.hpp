#pragma once
// Where a run's first parameters come from when they are not the init's (model/init.hpp): a
// pretrained model's files (hf/hf_weights.hpp). The trainer asks for each layer's part it holds:
// the whole flat buffer (param_table.hpp), or a sharded rank's contiguous range of it, so a
// source reads only what the rank keeps.
#include <cstddef>
#include <string>

namespace asteria {

class ParamSource {
 public:
  virtual ~ParamSource() = default;
  // Writes elements [begin, begin + count) of layer l's flat parameter buffer into dst (float).
  // Throws asteria::Error naming the file and tensor when the source cannot be read.
  virtual void fill(int layer, size_t begin, size_t count, float* dst) const = 0;
  // What the values come from, for the startup line ("Hugging Face folder DIR (BF16)").
  virtual std::string describe() const = 0;
};

}  // namespace asteria
