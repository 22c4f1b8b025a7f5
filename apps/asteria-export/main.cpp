// asteria-export: an Asteria checkpoint folder -> a Hugging Face-style model folder
// (config.json, model.safetensors, tokenizer.model, tokenizer_note.json) that transformers'
// OlmoForCausalLM (pre-norm LayerNorm) or Olmo2ForCausalLM (post-norm RMSNorm + QK-norm) load.
//
//   asteria-export --checkpoint DIR --out DIR [--dtype fp32|bf16] [--tokenizer PATH]
//
// Exit codes: 0 done; 1 refused (unsupported model, bad checkpoint or tokenizer; the message
// names the file and tensor, and --out is untouched); 2 bad command line.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "core/error.hpp"
#include "export.hpp"

int main(int argc, char** argv) {
  asteria::export_cli::ExportOptions opt;
  CLI::App app{"asteria-export: Asteria checkpoint -> Hugging Face OLMo / OLMo-2 model folder"};
  app.add_option("--checkpoint", opt.checkpoint, "checkpoint folder (manifest.json, rank00000.h5)")
      ->required();
  app.add_option("--out", opt.out, "output folder (must not exist, or be empty)")->required();
  app.add_option("--dtype", opt.dtype, "tensor dtype in model.safetensors")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--tokenizer", opt.tokenizer,
                 "sentencepiece model to copy (default: found next to the config's data.train)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    const auto s = asteria::export_cli::run_export(opt);
    std::printf("exported step %lld as %s: %zu tensors, %zu bytes (%s) -> %s\n", s.step,
                s.architecture.c_str(), s.tensors, s.safetensors_bytes, opt.dtype.c_str(),
                opt.out.c_str());
    if (s.tokenizer)
      std::printf("tokenizer: %s\n", s.tokenizer->c_str());
    else
      std::fprintf(stderr,
                   "asteria-export: warning: no tokenizer given (--tokenizer) or found next to "
                   "data.train; the folder has none and config.json names no token ids\n");
  } catch (const asteria::Error& e) {
    std::fprintf(stderr, "asteria-export: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asteria-export: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
