// asteria-generate: text from a trained model, an Asteria checkpoint or a Hugging Face OLMo /
// OLMo-2 folder, over a key/value cache on the CPU or the GPU.
//
//   asteria-generate (--checkpoint DIR | --hf DIR) (--prompt TEXT | --ids "1 2 3")
//                    [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
//                    [--tokenizer PATH] [--ignore-eos] [--no-cache] [--backend auto|cpu|cuda]
//                    [--context N] [--threads N] [--print-ids]
//
// stdout: the prompt and its continuation as text (with a tokenizer), and with --print-ids (or
// without a tokenizer) the new token ids on a line of their own. stderr: what was loaded and the
// speed. Exit codes: 0 done; 1 refused (a bad model folder, tokenizer, prompt or setting: the
// message names it); 2 bad command line.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "core/cpu/blas_kernels.hpp"
#include "core/error.hpp"
#include "generate.hpp"

int main(int argc, char** argv) {
  asteria::generate_cli::GenerateOptions opt;
  std::string ids;
  int threads = 0;
  bool ignore_eos = false, no_cache = false, print_ids = false;
  CLI::App app{"asteria-generate: text from an Asteria checkpoint or a Hugging Face OLMo / OLMo-2 folder"};
  auto* model = app.add_option_group("model");
  model->add_option("--checkpoint", opt.checkpoint, "an Asteria checkpoint folder (manifest.json, rank*.h5)");
  model->add_option("--hf", opt.hf, "a Hugging Face OlmoForCausalLM / Olmo2ForCausalLM folder (config.json, safetensors)");
  model->require_option(1);
  auto* prompt = app.add_option_group("prompt");
  prompt->add_option("--prompt", opt.prompt, "the prompt as text (through the model's tokenizer)");
  prompt->add_option("--ids", ids, "the prompt as token ids, separated by spaces");
  prompt->require_option(1);
  app.add_option("--max-new-tokens,-n", opt.max_new_tokens, "tokens to generate at most")->check(CLI::PositiveNumber);
  app.add_option("--temperature", opt.sampling.temperature, "0 (default): greedy; > 0: sample from softmax(logits / T)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", opt.sampling.top_k, "sample among the k most likely tokens only (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", opt.sampling.top_p, "sample among the most likely tokens whose probability reaches p")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", opt.sampling.seed, "seed of the sampling draws (the same seed gives the same text)");
  app.add_option("--tokenizer", opt.tokenizer, "sentencepiece model (default: the model's own)");
  app.add_flag("--ignore-eos", ignore_eos, "generate --max-new-tokens tokens even past the end-of-document token");
  app.add_flag("--no-cache", no_cache, "recompute the whole sequence for every token (no key/value cache: the baseline)");
  app.add_option("--backend", opt.backend, "auto (the GPU where one is visible), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--context", opt.context, "positions the cache holds (default: the model's seq_len)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "compute threads (0: all cores)")->check(CLI::NonNegativeNumber);
  app.add_flag("--print-ids", print_ids, "also print the new token ids");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty())
      std::fprintf(stderr, "%s\n", line.c_str());
    if (threads > 0) omp_set_num_threads(threads);
    opt.ids_given = !ids.empty();
    if (opt.ids_given) {
      std::istringstream in(ids);
      for (std::string word; in >> word;) {
        size_t used = 0;
        long long v = -1;
        try {
          v = std::stoll(word, &used);
        } catch (const std::exception&) {
        }
        if (used != word.size() || v < 0 || v > INT32_MAX) asteria::fail("--ids: '", asteria::excerpt(word), "' is not a token id");
        opt.prompt_ids.push_back(static_cast<int32_t>(v));
      }
    }
    opt.stop_at_eos = !ignore_eos;
    opt.kv_cache = !no_cache;
    const auto r = asteria::generate_cli::run_generate(opt);
    if (r.text) std::printf("%s\n", r.text->c_str());
    if (print_ids || !r.text) {
      std::string line;
      for (int32_t id : r.new_ids) line += (line.empty() ? "" : " ") + std::to_string(id);
      std::printf("ids: %s\n", line.c_str());
    }
    const double tps = r.generate_s > 0 ? r.new_ids.size() / r.generate_s : 0;
    std::fprintf(stderr,
                 "asteria-generate: %s on %s; loaded in %.2f s (parameters read in %.2f s); prompt %zu tokens in %.3f s; "
                 "%zu new tokens in %.3f s = %.2f tokens/s (%s)%s\n",
                 r.model.c_str(), r.backend.c_str(), r.load_s, r.read_s, r.prompt_ids.size(), r.prompt_s, r.new_ids.size(),
                 r.generate_s, tps, opt.kv_cache ? "key/value cache" : "no cache", r.stopped_at_eos ? "; stopped at EOS" : "");
  } catch (const asteria::Error& e) {
    std::fprintf(stderr, "asteria-generate: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asteria-generate: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
