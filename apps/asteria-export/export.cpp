#include "export.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "hf/hf_config.hpp"
#include "hf/hf_tensor_map.hpp"
#include "hf/safetensors.hpp"
#include "data/sentencepiece_to_hf.hpp"
#include "tokenizer_export.hpp"
#include "train/checkpoint/checkpoint_params.hpp"

namespace asteria::export_cli {

namespace {

namespace fs = std::filesystem;

hf::WeightDtype parse_dtype(const std::string& text) {
  if (text == "fp32") return hf::WeightDtype::F32;
  if (text == "bf16") return hf::WeightDtype::BF16;
  fail("--dtype must be fp32 or bf16 (got '", excerpt(text), "')");
}

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

// Every HF tensor as a view into the checkpoint tensor it is cut from.
std::vector<hf::TensorToWrite> tensors_to_write(const CheckpointParams& ck, hf::HfFamily family) {
  std::vector<hf::TensorToWrite> out;
  for (const hf::TensorSlot& s : hf::tensor_map(ck.config.model, family))
    out.push_back({s.name, s.shape, ck.params.at(s.entry).data.data() + s.entry_begin});
  return out;
}

hf::TokenIds token_ids(const std::optional<TokenizerInfo>& tok) {
  hf::TokenIds ids;   // a sentencepiece id of -1 means none
  if (!tok) return ids;
  auto id = [](int v) { return v < 0 ? std::nullopt : std::optional<int64_t>(v); };
  ids.bos = id(tok->bos_id);
  ids.eos = id(tok->eos_id);
  ids.pad = id(tok->pad_id);
  return ids;
}

void write_folder(const fs::path& dir, const CheckpointParams& ck, hf::HfFamily family, hf::WeightDtype dtype,
                  const std::optional<TokenizerInfo>& tok, const std::optional<HfTokenizerFiles>& hf_tok,
                  const std::vector<hf::TensorToWrite>& tensors) {
  write_text(dir / "config.json", hf::config_json(ck.config.model, family, dtype, token_ids(tok)).dump(2) + "\n");
  hf::write_safetensors((dir / "model.safetensors").string(), tensors, dtype);
  if (tok) {
    std::error_code ec;
    fs::copy_file(tok->path, dir / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
    if (ec) fail("cannot copy tokenizer ", tok->path, " to ", (dir / "tokenizer.model").string(), ": ", ec.message());
  }
  // What Hugging Face's AutoTokenizer loads (a fast tokenizer needs tokenizer.json).
  if (hf_tok) write_hf_tokenizer_files(*hf_tok, dir.string());
  write_text(dir / "tokenizer_note.json", tokenizer_note(tok, ck.config.model).dump(2) + "\n");
}

}  // namespace

ExportSummary run_export(const ExportOptions& opt) {
  // Read and check everything first: nothing under --out is written before this succeeds.
  const hf::WeightDtype dtype = parse_dtype(opt.dtype);
  check_out_is_free(opt.out);
  const CheckpointParams ck = read_checkpoint_params(opt.checkpoint);
  const hf::HfFamily family = hf::family_for(ck.config.model, "cannot export");
  const std::optional<TokenizerInfo> tok = locate_tokenizer(ck.config, opt.tokenizer);
  const std::vector<hf::TensorToWrite> tensors = tensors_to_write(ck, family);
  std::optional<HfTokenizerFiles> hf_tok;
  if (tok) hf_tok = sentencepiece_to_hf(tok->path, ck.config.model.seq_len);

  const fs::path out = fs::absolute(opt.out).lexically_normal();
  const fs::path staging = out.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::create_directories(out.parent_path(), ec);
  fs::remove_all(staging, ec);
  if (!fs::create_directory(staging, ec))
    fail("cannot create ", staging.string(), ": ", ec ? ec.message() : "it exists");
  try {
    write_folder(staging, ck, family, dtype, tok, hf_tok, tensors);
    if (fs::exists(out)) fs::remove(out);   // an empty folder (check_out_is_free)
    fs::rename(staging, out);
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }

  ExportSummary s;
  s.step = ck.step;
  s.architecture = hf::architecture(family);
  s.tensors = tensors.size();
  s.safetensors_bytes = fs::file_size(out / "model.safetensors");
  if (tok) s.tokenizer = tok->path + " (" + tok->found_by + ")";
  return s;
}

}  // namespace asteria::export_cli
