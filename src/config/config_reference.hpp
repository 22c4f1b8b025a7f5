#pragma once
// The reference of every config key (docs/configuration.md), generated from the schema
// (config_schema.hpp) so it cannot drift from what the reader accepts: each key's type, its
// default, the values its check allows and a one-line meaning, plus the defaults that depend on
// optim.name (optim_defaults) and on model.preset (model_preset).
//   asteria-train --print-config-reference > docs/configuration.md
// ctest docs.configuration fails when the file in the repository differs from this output.
#include <string>

namespace asteria {

// The whole of docs/configuration.md (markdown). Throws asteria::Error when a key of the schema
// has no one-line meaning in the table beside the generator (config_reference.cpp), or the table
// names a key the schema does not have.
std::string config_reference_markdown();

}  // namespace asteria
