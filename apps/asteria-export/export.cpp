#include "export.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint_reader.hpp"
#include "core/error.hpp"
#include "hf_config.hpp"
#include "hf_layout.hpp"
#include "safetensors_writer.hpp"
#include "tokenizer_export.hpp"

namespace asteria::export_cli {

namespace {

namespace fs = std::filesystem;

void check_out_is_free(const std::string& out) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec) || !fs::is_empty(out, ec))
    fail("--out ", out, " exists and is not an empty folder; choose a new folder or remove it");
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.flush();
  if (!f) fail("cannot write ", path.string());
}

void write_folder(const fs::path& dir, const CheckpointParams& ck, HfFamily family,
                  ExportDtype dtype, const std::optional<TokenizerInfo>& tok,
                  const std::vector<HfTensor>& tensors) {
  write_text(dir / "config.json", hf_config_json(ck.config.model, family, dtype, tok).dump(2) + "\n");
  write_safetensors((dir / "model.safetensors").string(), tensors, dtype);
  if (tok) {
    std::error_code ec;
    fs::copy_file(tok->path, dir / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
    if (ec) fail("cannot copy tokenizer ", tok->path, " to ", (dir / "tokenizer.model").string(),
                 ": ", ec.message());
  }
  write_text(dir / "tokenizer_note.json", tokenizer_note(tok, ck.config.model).dump(2) + "\n");
}

}  // namespace

ExportSummary run_export(const ExportOptions& opt) {
  // Read and check everything first: nothing under --out is written before this succeeds.
  const ExportDtype dtype = parse_export_dtype(opt.dtype);
  check_out_is_free(opt.out);
  const CheckpointParams ck = read_checkpoint_params(opt.checkpoint);
  const HfFamily family = hf_family_for(ck.config.model);
  const std::optional<TokenizerInfo> tok = locate_tokenizer(ck.config, opt.tokenizer);
  const std::vector<HfTensor> tensors = hf_tensors(ck.config.model, family, ck.params);

  const fs::path out = fs::absolute(opt.out).lexically_normal();
  const fs::path staging = out.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec))
    fail("cannot create ", staging.string(), ": ", ec ? ec.message() : "it exists");
  try {
    write_folder(staging, ck, family, dtype, tok, tensors);
    if (fs::exists(out)) fs::remove(out);   // an empty folder (check_out_is_free)
    fs::rename(staging, out);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }

  ExportSummary s;
  s.step = ck.step;
  s.architecture = hf_architecture(family);
  s.tensors = tensors.size();
  s.safetensors_bytes = fs::file_size(out / "model.safetensors");
  if (tok) s.tokenizer = tok->path + " (" + tok->found_by + ")";
  return s;
}

}  // namespace asteria::export_cli
