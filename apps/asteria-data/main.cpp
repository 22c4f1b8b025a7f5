// asteria-data: turns a text corpus into token files for asteria-train, and inspects them.
//
//   asteria-data train-tokenizer --corpus corpus.jsonl --vocab-size 4096 --output tok
//   asteria-data encode --corpus corpus.jsonl --tokenizer tok.model --output-dir data/
//   asteria-data inspect data/train.bin --tokenizer tok.model --show 64
//   asteria-data export-tokenizer --tokenizer tok.model --out hf/   (Hugging Face's files)
//
// Exit status: 0 on success, 1 on bad input (the message names the file and the problem),
// 2 on a bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "commands.hpp"
#include "core/error.hpp"

using namespace asteria::data_cli;

int main(int argc, char** argv) {
  CLI::App app{"asteria-data: text corpus -> tokenizer -> token files"};
  app.require_subcommand(1);

  TrainTokenizerOptions tt;
  auto* train_cmd = app.add_subcommand(
      "train-tokenizer", "train a SentencePiece BPE tokenizer (EOS id 1, byte fallback)");
  train_cmd->add_option("--corpus", tt.corpus, "corpus, JSON lines with a \"text\" field")
      ->required();
  train_cmd->add_option("--vocab-size", tt.vocab_size, "vocabulary size")
      ->capture_default_str()
      ->check(CLI::Range(260, 1 << 20));
  train_cmd->add_option("--output", tt.output, "writes OUTPUT.model and OUTPUT.vocab")->required();
  train_cmd->add_option("--threads", tt.threads, "training threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  train_cmd->add_option("--max-train-bytes", tt.max_train_bytes,
                        "larger corpora train on an evenly spaced subset of this size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train_cmd->add_flag("--verbose", tt.verbose, "show SentencePiece's training log");

  EncodeOptions en;
  auto* encode_cmd = app.add_subcommand(
      "encode", "tokenize every document (EOS after each) into train.bin and val.bin");
  encode_cmd->add_option("--corpus", en.corpus, "corpus, JSON lines with a \"text\" field")
      ->required();
  encode_cmd->add_option("--tokenizer", en.tokenizer, "PREFIX.model from train-tokenizer, or a Hugging Face tokenizer.json (or a model folder holding one)")
      ->required();
  encode_cmd->add_option("--output-dir", en.output_dir, "writes train.bin, val.bin, data.json")
      ->required();
  auto* fraction = encode_cmd
                       ->add_option("--val-fraction", en.val_fraction,
                                    "hold out every round(1/F)-th document for validation")
                       ->capture_default_str()
                       ->check(CLI::Range(0.0001, 0.5));
  encode_cmd->add_option("--val-every", en.val_every, "hold out every N-th document (N >= 2)")
      ->check(CLI::Range(2, 1 << 30))
      ->excludes(fraction);
  encode_cmd->add_option("--threads", en.threads, "encoding threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));

  ExportTokenizerOptions ex;
  auto* export_cmd = app.add_subcommand("export-tokenizer", "write Hugging Face's tokenizer files for a tokenizer.model");
  export_cmd->add_option("--tokenizer", ex.tokenizer, "PREFIX.model from train-tokenizer")->required()->check(CLI::ExistingFile);
  export_cmd->add_option("--out", ex.out, "folder for tokenizer.json, tokenizer_config.json, special_tokens_map.json")->required();
  export_cmd->add_option("--max-length", ex.max_length, "model_max_length (the model's sequence length)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  InspectOptions in;
  auto* inspect_cmd = app.add_subcommand("inspect", "validate a token file and show its start");
  inspect_cmd->add_option("file", in.file, "token file (.bin)")->required();
  inspect_cmd->add_option("--vocab-size", in.vocab_size,
                          "vocabulary size (default: the tokenizer's)")
      ->check(CLI::PositiveNumber);
  inspect_cmd->add_option("--tokenizer", in.tokenizer, "PREFIX.model or a Hugging Face tokenizer.json / folder: decode and count documents");
  inspect_cmd->add_option("--dtype", in.dtype, "token width")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "uint16", "uint32"}));
  inspect_cmd->add_option("--show", in.show, "number of leading tokens to print")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints the message (or the help, rc 0)
    return rc == 0 ? 0 : 2;
  }

  try {
    if (train_cmd->parsed()) train_tokenizer(tt);
    if (encode_cmd->parsed()) encode(en);
    if (inspect_cmd->parsed()) inspect(in);
    if (export_cmd->parsed()) export_tokenizer(ex);
  } catch (const asteria::Error& e) {
    std::fprintf(stderr, "asteria-data: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "asteria-data: unexpected error: %s\n", e.what());
    return 1;
  }
  return 0;
}
