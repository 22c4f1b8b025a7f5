#include "generate.hpp"

#include <filesystem>
#include <memory>

#include "core/backend.hpp"
#include "core/cuda_visibility.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/tokenizer.hpp"
#include "hf/hf_config.hpp"
#include "hf/hf_weights.hpp"
#include "model/decoder.hpp"
#include "model/ops/op_set.hpp"
#include "train/checkpoint/checkpoint_params.hpp"

namespace asteria::generate_cli {

namespace {

namespace fs = std::filesystem;

// The model to generate with, whichever kind of folder it came from.
struct LoadedModel {
  ModelConfig cfg;
  std::unique_ptr<CheckpointParams> checkpoint;   // an Asteria checkpoint's parameters ...
  std::unique_ptr<hf::HfWeights> hf;              // ... or a Hugging Face folder's
  std::unique_ptr<CheckpointParamSource> checkpoint_source;
  std::optional<std::string> tokenizer_path;
  std::optional<int64_t> eos;                     // without a tokenizer: the folder's eos_token_id
  const ParamSource& source() const {
    return hf ? static_cast<const ParamSource&>(*hf) : static_cast<const ParamSource&>(*checkpoint_source);
  }
};

LoadedModel open_model(const GenerateOptions& opt) {
  LoadedModel m;
  if (!opt.checkpoint.empty()) {
    m.checkpoint = std::make_unique<CheckpointParams>(read_checkpoint_params(opt.checkpoint));
    m.cfg = m.checkpoint->config.model;
    m.checkpoint_source = std::make_unique<CheckpointParamSource>(*m.checkpoint);
    m.tokenizer_path = tokenizer_beside(m.checkpoint->config.data.train);
  } else {
    const hf::HfModelConfig hc = hf::read_config(opt.hf);
    m.cfg = hc.model;
    m.eos = hc.ids.eos;
    m.hf = std::make_unique<hf::HfWeights>(opt.hf, m.cfg);
    if (const fs::path beside = fs::path(opt.hf) / "tokenizer.model"; fs::exists(beside)) m.tokenizer_path = beside.string();
  }
  if (!opt.tokenizer.empty()) m.tokenizer_path = opt.tokenizer;
  return m;
}

template <class Ops>
void decode(const GenerateOptions& opt, const LoadedModel& m, int vocab, std::optional<int64_t> eos, GenerateResult& r) {
  const int context = opt.context > 0 ? opt.context : m.cfg.seq_len;
  // Positions the model runs: the prompt and every new token but the last (never fed back).
  const int positions = static_cast<int>(r.prompt_ids.size()) + opt.max_new_tokens - 1;
  ASTERIA_CHECK(positions <= context, "the prompt (", r.prompt_ids.size(), " tokens) and --max-new-tokens (",
                opt.max_new_tokens, ") exceed the context of ", context, " positions (--context to change it)");
  Timer load;
  Decoder<float, Ops> decoder(m.cfg, context);
  Timer read;
  decoder.load(m.source());
  r.read_s = read.seconds();
  r.load_s += load.seconds();
  Sampler sampler(opt.sampling);
  std::vector<int32_t> all = r.prompt_ids;
  Timer prompt;
  const std::vector<float>* logits = &decoder.forward(all.data(), static_cast<int>(all.size()));
  r.prompt_s = prompt.seconds();
  Timer gen;
  for (int i = 0; i < opt.max_new_tokens; i++) {
    if (i > 0) {
      if (opt.kv_cache) {
        logits = &decoder.forward(&all.back(), 1);
      } else {   // the whole sequence again, no cache kept between tokens
        decoder.reset();
        logits = &decoder.forward(all.data(), static_cast<int>(all.size()));
      }
    }
    const int32_t next = sampler.next(logits->data(), vocab);
    all.push_back(next);
    r.new_ids.push_back(next);
    if (opt.stop_at_eos && eos && next == *eos) {
      r.stopped_at_eos = true;
      break;
    }
  }
  r.generate_s = gen.seconds();
}

}  // namespace

GenerateResult run_generate(const GenerateOptions& opt) {
  ASTERIA_CHECK(opt.checkpoint.empty() != opt.hf.empty(), "give one model: --checkpoint DIR or --hf DIR");
  ASTERIA_CHECK(opt.max_new_tokens >= 1, "--max-new-tokens must be >= 1");
  GenerateResult r;
  Timer load;
  const LoadedModel m = open_model(opt);
  std::optional<Tokenizer> tok;
  if (m.tokenizer_path) tok.emplace(*m.tokenizer_path);
  if (opt.ids_given) {
    r.prompt_ids = opt.prompt_ids;
  } else {
    ASTERIA_CHECK(tok, "--prompt needs the model's tokenizer: none was found (",
                  opt.checkpoint.empty() ? "no tokenizer.model in " + opt.hf : "none next to the checkpoint's data.train",
                  "); give --tokenizer, or the prompt as --ids");
    r.prompt_ids = tok->encode(opt.prompt);
  }
  ASTERIA_CHECK(!r.prompt_ids.empty(), "the prompt is empty: give at least one token");
  // Candidates: the tokenizer's ids (never the embedding's padding rows).
  const int vocab = tok ? static_cast<int>(tok->vocab_size()) : m.cfg.vocab_size;
  ASTERIA_CHECK(vocab <= m.cfg.embedding_size, "tokenizer ", *m.tokenizer_path, " has ", vocab,
                " pieces but the model has ", m.cfg.embedding_size, " rows: not this model's tokenizer");
  for (int32_t id : r.prompt_ids)
    ASTERIA_CHECK(id >= 0 && id < vocab, "prompt token id ", id, " is outside the vocabulary of ", vocab);
  const std::optional<int64_t> eos = tok ? std::optional<int64_t>(tok->eos_id()) : m.eos;
  r.model = m.source().describe();
  r.load_s = load.seconds();

  std::string why;
  const bool cuda = opt.backend == "cuda" || (opt.backend == "auto" && cuda_device_visible_here(&why));
  ASTERIA_CHECK(opt.backend == "auto" || opt.backend == "cpu" || opt.backend == "cuda", "--backend must be auto, cpu or cuda");
  if (cuda) {
#ifdef ASTERIA_HAVE_CUDA
    ASTERIA_CHECK(cuda_backend_available(&why), "--backend cuda: ", why);
    decode<CudaOps>(opt, m, vocab, eos, r);
#else
    fail("--backend cuda: this build has no CUDA backend");
#endif
  } else {
    decode<CpuOps>(opt, m, vocab, eos, r);
  }
  r.backend = cuda ? "cuda" : "cpu";
  if (tok) {
    std::vector<int32_t> all = r.prompt_ids;
    all.insert(all.end(), r.new_ids.begin(), r.new_ids.end());
    r.text = tok->decode(all);
  }
  return r;
}

}  // namespace asteria::generate_cli
