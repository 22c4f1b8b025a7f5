#pragma once
// The subcommands of asteria-data. Each takes its parsed options, prints what it did to stdout,
// and throws asteria::Error (naming the file and what is wrong) on bad input. Outputs are
// written under temporary names and renamed when complete.
#include <cstdint>
#include <string>

namespace asteria::data_cli {

struct TrainTokenizerOptions {
  std::string corpus;           // JSON lines, see data/corpus_jsonl.hpp
  int vocab_size = 4096;
  std::string output;           // writes output.model and output.vocab
  int threads = 2;
  int64_t max_train_bytes = 256 << 20;  // larger corpora are subsampled deterministically
  bool verbose = false;         // sentencepiece's own log
};
void train_tokenizer(const TrainTokenizerOptions& opt);

struct EncodeOptions {
  std::string corpus;
  std::string tokenizer;        // PREFIX.model
  std::string output_dir;       // writes train.bin, val.bin, data.json
  double val_fraction = 0.02;   // held out: every round(1 / val_fraction)-th document
  int val_every = 0;            // when > 0, overrides val_fraction: every val_every-th document
  int threads = 2;
};
void encode(const EncodeOptions& opt);

// Hugging Face's tokenizer files for a train-tokenizer model (data/sentencepiece_to_hf.hpp), as
// asteria-export writes them beside a model.
struct ExportTokenizerOptions {
  std::string tokenizer;       // PREFIX.model
  std::string out;             // the folder
  int64_t max_length = 2048;   // tokenizer_config.json's model_max_length
};
void export_tokenizer(const ExportTokenizerOptions& opt);

struct InspectOptions {
  std::string file;
  int64_t vocab_size = 0;       // 0: the tokenizer's
  std::string tokenizer;        // optional: decode tokens, count documents
  std::string dtype = "auto";   // auto (from the vocabulary size), uint16, uint32
  int show = 32;                // first tokens to print
};
void inspect(const InspectOptions& opt);

}  // namespace asteria::data_cli
