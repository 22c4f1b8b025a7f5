#include "checkpoint_reader.hpp"

#include <xxhash.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/hdf5_file.hpp"
#include "model/model.hpp"

namespace asteria::export_cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

json read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("checkpoint manifest ", path, " is missing (no manifest, no checkpoint)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    fail("checkpoint manifest ", path, " is not valid JSON: ", e.what());
  }
}

// The manifest field `key` with the given JSON type, or an error naming the manifest.
const json& field(const json& m, const std::string& path, const char* key, json::value_t type,
                  const char* type_name) {
  if (!m.is_object() || !m.contains(key)) fail("checkpoint manifest ", path, " has no \"", key, "\"");
  const json& v = m.at(key);
  const bool ok = v.type() == type || (type == json::value_t::number_integer && v.is_number_integer());
  if (!ok) fail("checkpoint manifest ", path, ": \"", key, "\" must be ", type_name);
  return v;
}

std::string xxh3_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("checkpoint file ", path, " cannot be opened");
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
  XXH3_64bits_reset(state.get());
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    XXH3_64bits_update(state.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, static_cast<uint64_t>(XXH3_64bits_digest(state.get())));
  return hex;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Checks size and checksum of every listed file; returns the path of the rank-0 parameter file.
std::string verify_files(const json& m, const std::string& manifest, const std::string& dir) {
  const json& files = field(m, manifest, "files", json::value_t::array, "a list");
  std::string rank0;
  for (const json& f : files) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_integer() || !f.contains("xxh3") || !f["xxh3"].is_string())
      fail("checkpoint manifest ", manifest,
           ": every \"files\" entry needs \"name\" (string), \"bytes\" (integer), \"xxh3\" (string)");
    const std::string name = f["name"];
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    const auto bytes = fs::file_size(path, ec);
    if (ec) fail("checkpoint file ", path, " listed in ", manifest, " is missing");
    if (static_cast<int64_t>(bytes) != f["bytes"].get<int64_t>())
      fail("checkpoint file ", path, " has ", bytes, " bytes; the manifest says ",
           f["bytes"].get<int64_t>());
    const std::string sum = xxh3_hex(path);
    if (sum != lower(f["xxh3"].get<std::string>()))
      fail("checkpoint file ", path, " has XXH3 ", sum, "; the manifest says ",
           f["xxh3"].get<std::string>(), " (the file is damaged or from another checkpoint)");
    if (name == "rank00000.h5") rank0 = path;
  }
  if (rank0.empty()) fail("checkpoint manifest ", manifest, " lists no rank00000.h5");
  return rank0;
}

}  // namespace

CheckpointParams read_checkpoint_params(const std::string& dir) {
  const std::string manifest = (fs::path(dir) / "manifest.json").string();
  const json m = read_manifest(manifest);
  const auto version =
      field(m, manifest, "format_version", json::value_t::number_integer, "an integer").get<int64_t>();
  if (version != 1)
    fail("checkpoint manifest ", manifest, " has format_version ", version,
         "; this asteria-export reads version 1");
  const auto world =
      field(m, manifest, "world_size", json::value_t::number_integer, "an integer").get<int64_t>();
  if (world != 1)
    fail("checkpoint ", dir, " was written by ", world,
         " ranks; asteria-export reads single-rank checkpoints (world_size 1) for now");

  CheckpointParams ck;
  ck.dir = dir;
  ck.step = field(m, manifest, "step", json::value_t::number_integer, "an integer").get<int64_t>();
  const std::string yaml =
      field(m, manifest, "config", json::value_t::string, "a string (YAML)").get<std::string>();
  ck.config = load_config_text(yaml, manifest);
  const std::string h5 = verify_files(m, manifest, dir);

  Hdf5File file(h5, Hdf5File::Mode::Read);
  for (const ParamTable& table : model_param_tables(ck.config.model)) {
    for (const ParamEntry& e : table.entries) {
      const std::string ds = "/params/" + e.name;
      if (!file.exists(ds))
        fail("checkpoint file ", h5, " has no tensor '", ds, "' (parameter ", e.name,
             " of the manifest's model config)");
      Hdf5Array a = file.read(ds);
      if (a.shape != e.shape)
        fail("checkpoint file ", h5, ": tensor '", ds, "' has shape ", shape_text(a.shape),
             " but the model config gives ", e.name, " the shape ", shape_text(e.shape));
      ck.params[e.name] = {a.shape, std::vector<float>(a.data.begin(), a.data.end())};
    }
  }
  return ck;
}

}  // namespace asteria::export_cli
