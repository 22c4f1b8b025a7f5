#include "train/trainer.hpp"

#include <utility>

#include "train/step_loop.hpp"
#include "train/training_run.hpp"

namespace asteria {

// The run assembled (and checked) at construction; its steps run by run().
struct Trainer::Impl {
  TrainingRun parts;
  StepLoop steps;
  Impl(const Config& cfg, Communicator* world, MemoryWatch memory) : parts(cfg, world, std::move(memory)), steps(parts) {}
};

Trainer::Trainer(const Config& cfg, Communicator* world, MemoryWatch memory)
    : impl_(std::make_unique<Impl>(cfg, world, std::move(memory))) {}
Trainer::~Trainer() = default;
TrainResult Trainer::run() { return impl_->steps.run(); }

std::vector<float> Trainer::final_params(int layer) const {
  const auto& gathered = impl_->steps.gathered_params();
  if (!gathered.empty()) return gathered.at(layer);
  return impl_->parts.host->params(layer);   // the model's, or read from the disk tier
}

int Trainer::num_layers() const { return impl_->parts.model->num_layers(); }

}  // namespace asteria
