#include "core/stateful.hpp"

#include <cmath>
#include <utility>

namespace asteria {

namespace {

// '/' separates HDF5 groups: stored as ':' (stateful.hpp).
std::string stored_name(std::string name) {
  for (char& c : name)
    if (c == '/') c = ':';
  return name;
}

std::string natural_name(std::string name) {
  for (char& c : name)
    if (c == ':') c = '/';
  return name;
}

}  // namespace

StateWriter::StateWriter(StateFields& fields, std::string component) : fields_(fields), prefix_(component + ".") {}

void StateWriter::put(const std::string& field, std::vector<double> values) {
  fields_[stored_name(prefix_ + field)] = std::move(values);
}

StateReader::StateReader(const StateFields& fields, std::string component, std::string source)
    : fields_(fields), prefix_(component + "."), source_(std::move(source)) {}

std::string StateReader::full_name(const std::string& field) const { return stored_name(prefix_ + field); }

bool StateReader::has(const std::string& field) const { return fields_.count(full_name(field)) > 0; }

const std::vector<double>& StateReader::get(const std::string& field, size_t length) const {
  const std::string name = full_name(field);
  const auto it = fields_.find(name);
  if (it == fields_.end()) fail("value '", name, "' is missing");
  if (length > 0 && it->second.size() != length)
    fail("value '", name, "' has ", it->second.size(), " entries, expected ", length);
  return it->second;
}

std::vector<int64_t> StateReader::ints(const std::string& field, size_t length) const {
  const std::vector<double>& v = get(field, length);
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    // 2^63 itself does not fit: the bound is exclusive.
    if (!(std::trunc(v[i]) == v[i] && std::fabs(v[i]) < 9223372036854775808.0))
      fail("value '", full_name(field), "' entry ", i, " is ", v[i], ", not an integer");
    out[i] = static_cast<int64_t>(v[i]);
  }
  return out;
}

std::vector<std::string> StateReader::fields(const std::string& start) const {
  const std::string first = full_name(start);
  std::vector<std::string> out;
  for (auto it = fields_.lower_bound(first); it != fields_.end() && it->first.compare(0, first.size(), first) == 0; ++it)
    out.push_back(natural_name(it->first.substr(prefix_.size())));
  return out;
}

void save_states(const std::vector<Stateful*>& components, StateFields& fields) {
  for (Stateful* c : components) {
    StateWriter w(fields, c->state_name());
    c->save_state(w);
  }
}

void load_states(const std::vector<Stateful*>& components, const StateFields& fields, const std::string& source) {
  for (Stateful* c : components) c->load_state(StateReader(fields, c->state_name(), source));
}

}  // namespace asteria
