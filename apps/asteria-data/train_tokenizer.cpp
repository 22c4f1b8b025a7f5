// train-tokenizer: a SentencePiece BPE model with the conventions the rest of Asteria assumes.
//   ids: 0 <unk>, 1 </s> (EOS, appended after every document), no BOS, no PAD,
//        2..257 the 256 byte pieces <0x00>..<0xFF> (byte_fallback: every string is encodable,
//        nothing ever maps to <unk>), then the learned pieces.
//   normalization: identity, whitespace kept as is, so decode(encode(text)) == text.
//   digits split into single pieces (numbers tokenize consistently).
// Training is deterministic: the sentences are fed in corpus order, never shuffled or sampled
// at random (a corpus over --max-train-bytes is thinned by a fixed stride).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/corpus_jsonl.hpp"
#include "data/tokenizer.hpp"
#include "output_files.hpp"
#include "training_sentences.hpp"

// Exported by libsentencepiece but missing from its public headers (0.1.97); the trainer logs
// every merge at INFO level otherwise.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}

namespace asteria::data_cli {

namespace {

constexpr int kUnkId = 0;
constexpr int kEosId = 1;
// Well below SentencePiece's max_sentence_length (4192 bytes), which it enforces by dropping.
constexpr size_t kMaxSentenceBytes = 2048;

class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& s) : s_(s) {}
  bool done() const override { return i_ >= s_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return s_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& s_;
  size_t i_ = 0;
};

}  // namespace

void train_tokenizer(const TrainTokenizerOptions& opt) {
  Timer timer;
  const auto docs = read_corpus_jsonl(opt.corpus);
  auto sentences = subsample_sentences(training_sentences(docs, kMaxSentenceBytes),
                                       opt.max_train_bytes);
  size_t bytes = 0;
  for (const auto& s : sentences) bytes += s.size();
  std::printf("corpus %s: %zu documents; training on %zu sentences, %zu bytes\n",
              opt.corpus.c_str(), docs.size(), sentences.size(), bytes);
  std::fflush(stdout);

  make_parent_dirs(opt.output);
  // No model_prefix: the trainer hands back the model instead of writing files, and the model
  // (which records its trainer options) does not depend on where it is written.
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(opt.vocab_size)},
      {"unk_id", std::to_string(kUnkId)},
      {"eos_id", std::to_string(kEosId)},
      {"bos_id", "-1"},
      {"pad_id", "-1"},
      {"byte_fallback", "true"},
      {"split_digits", "true"},
      {"character_coverage", "0.9999"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"max_sentence_length", "4192"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", std::to_string(opt.threads)},
  };
  sentencepiece::logging::SetMinLogLevel(opt.verbose ? 0 : 1);
  VectorSentenceIterator it(sentences);
  std::string model;  // serialized ModelProto; with it given the trainer writes no files
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!status.ok())
    fail("training a tokenizer of ", opt.vocab_size, " pieces on ", opt.corpus,
         " failed: ", status.ToString());

  // Check the model is what the rest of Asteria assumes before it takes the final name.
  sentencepiece::SentencePieceProcessor sp;
  const auto loaded = sp.LoadFromSerializedProto(model);
  if (!loaded.ok()) fail("trained tokenizer does not load: ", loaded.ToString());
  ASTERIA_CHECK(sp.GetPieceSize() == opt.vocab_size && sp.eos_id() == kEosId &&
                    sp.unk_id() == kUnkId && sp.bos_id() < 0,
                "trained tokenizer has ", sp.GetPieceSize(), " pieces, EOS id ", sp.eos_id(),
                ", UNK id ", sp.unk_id(), ", BOS id ", sp.bos_id(), "; expected ", opt.vocab_size,
                ", ", kEosId, ", ", kUnkId, ", none");

  // The .vocab in SentencePiece's own format (piece, tab, score): for people, not programs.
  std::ostringstream vocab;
  for (int id = 0; id < sp.GetPieceSize(); ++id)
    vocab << sp.IdToPiece(id) << '\t' << sp.GetScore(id) << '\n';
  write_file_atomically(opt.output + ".vocab", vocab.str());
  // The .model last: its presence means the pair is complete.
  write_file_atomically(opt.output + ".model", model);
  std::printf("wrote %s.model and %s.vocab: %d pieces (unk %d, eos %d, no bos) in %.1f s\n",
              opt.output.c_str(), opt.output.c_str(), opt.vocab_size, kUnkId, kEosId,
              timer.seconds());
}

}  // namespace asteria::data_cli
