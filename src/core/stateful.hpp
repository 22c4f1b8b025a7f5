#pragma once
// The contract between a component that has state to keep across a restart (the train loader,
// the optimizer's counters, the shadow pipeline, the coherence registry, ...) and whatever keeps
// it (the checkpointer, train/checkpoint/): the component saves named fields and loads them
// back; the keeper stores them without knowing what they mean, so adding a component never
// changes the keeper.
//
// Fields are float64 arrays, the form a checkpoint stores them in (/values/<name> of each rank's
// file, docs/DESIGN.md "Checkpoints"), so a checkpoint's bytes stay those of the format: integers are
// stored as doubles (exact below 2^53; a 64-bit seed is saved as two 32-bit halves). A field's
// full name is "<component>.<field>" (the component's state_name()); a '/' in it is stored as
// ':' ('/' separates HDF5 groups; no field name contains ':'), which the writer and the reader
// do, so components use their natural names.
//
// Large tensors (parameters, optimizer moments and factors) are not fields: they live in tiers
// and are laid out as StatePieces (optim/optimizer.hpp) that the keeper streams.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace asteria {

// Every saved field by full name, sorted (std::map): a file's layout does not depend on the
// order in which the components saved.
using StateFields = std::map<std::string, std::vector<double>>;

// Saves one component's fields into `fields`, under "<component>.".
class StateWriter {
 public:
  StateWriter(StateFields& fields, std::string component);
  void put(const std::string& field, std::vector<double> values);
  void put(const std::string& field, double value) { put(field, std::vector<double>{value}); }
  template <class Int>
  void put_ints(const std::string& field, const std::vector<Int>& values) {
    put(field, std::vector<double>(values.begin(), values.end()));
  }

 private:
  StateFields& fields_;
  std::string prefix_;
};

// Loads one component's fields from what a keeper read from `source` (a checkpoint file, named
// in every error). A missing field, or one of another length, is an asteria::Error naming the
// field's full name and the source.
class StateReader {
 public:
  StateReader(const StateFields& fields, std::string component, std::string source);
  bool has(const std::string& field) const;
  // length 0: any.
  const std::vector<double>& get(const std::string& field, size_t length = 0) const;
  double scalar(const std::string& field) const { return get(field, 1)[0]; }
  // The values as integers; a value that is not one is an Error (a corrupt field).
  std::vector<int64_t> ints(const std::string& field, size_t length = 0) const;
  // The component's field names (without its prefix, '/' restored) that start with `start`.
  std::vector<std::string> fields(const std::string& start = "") const;
  const std::string& source() const { return source_; }
  // An Error that names the source first ("<file>: ...").
  template <class... Args>
  [[noreturn]] void fail(const Args&... args) const {
    ::asteria::fail(source_, ": ", args...);
  }

 private:
  std::string full_name(const std::string& field) const;
  const StateFields& fields_;
  std::string prefix_;
  std::string source_;
};

// A component with state. save_state runs at a step boundary (no lane running) and may first
// bring the component to a point it can be saved at (the shadow pipeline computes its open
// refreshes to the end), so it is not const. load_state runs before the first step of a resumed
// run; it checks the fields it reads (an Error naming them) before it changes the component.
struct Stateful {
  virtual ~Stateful() = default;
  // The prefix of the component's fields ("loader", "optim", "shadow", "coherence"): fixed, as
  // it is part of the checkpoint format.
  virtual std::string state_name() const = 0;
  virtual void save_state(StateWriter& out) = 0;
  virtual void load_state(const StateReader& in) = 0;
};

// Each component's save_state into `fields` (added to what it holds), and each one's load_state.
void save_states(const std::vector<Stateful*>& components, StateFields& fields);
void load_states(const std::vector<Stateful*>& components, const StateFields& fields, const std::string& source);

}  // namespace asteria
