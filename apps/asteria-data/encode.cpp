// encode: corpus -> train.bin + val.bin (+ data.json describing them).
//
// Every document becomes its token ids followed by EOS, so a model learns where documents end
// and instances may span documents (as in OLMo's pre-training data). Documents are held out
// whole for validation: document i (0-based, in corpus order) goes to val.bin when
// i % N == N - 1, where N = --val-every or round(1 / --val-fraction); a fixed stride rather than a
// random draw, so the split is obvious and spreads over every source of an ordered corpus.
// Documents are encoded on several threads into per-document slots and written in corpus order:
// the output does not depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/corpus_jsonl.hpp"
#include "data/token_file.hpp"
#include "data/token_writer.hpp"
#include "data/tokenizer.hpp"
#include "output_files.hpp"

namespace asteria::data_cli {

namespace {

std::vector<std::vector<int32_t>> encode_documents(const Tokenizer& tok,
                                                   const std::vector<CorpusDocument>& docs,
                                                   int threads) {
  std::vector<std::vector<int32_t>> ids(docs.size());
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < docs.size();) {
      try {
        ids[i] = tok.encode(docs[i].text);
        ids[i].push_back(tok.eos_id());
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = docs.size();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return ids;
}

}  // namespace

void encode(const EncodeOptions& opt) {
  Timer timer;
  const Tokenizer tok(opt.tokenizer);
  const auto docs = read_corpus_jsonl(opt.corpus);
  const int64_t every =
      opt.val_every > 0 ? opt.val_every : std::max<int64_t>(2, std::llround(1.0 / opt.val_fraction));
  if (static_cast<int64_t>(docs.size()) < every)
    fail("corpus ", opt.corpus, " has ", docs.size(), " documents; holding out every ", every,
         "-th for validation needs at least ", every, " (lower --val-every or raise --val-fraction)");

  Timer encoding;
  const auto ids = encode_documents(tok, docs, opt.threads);
  const double encode_s = encoding.seconds();

  std::error_code ec;
  std::filesystem::create_directories(opt.output_dir, ec);
  if (ec) fail("cannot create output folder ", opt.output_dir, ": ", ec.message());
  const TokenDtype dtype = token_dtype_for_vocab(tok.vocab_size());
  const std::string train_path = (std::filesystem::path(opt.output_dir) / "train.bin").string();
  const std::string val_path = (std::filesystem::path(opt.output_dir) / "val.bin").string();
  TokenFileWriter train(train_path, dtype), val(val_path, dtype);
  size_t train_docs = 0, val_docs = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const bool held_out = static_cast<int64_t>(i % every) == every - 1;
    (held_out ? val : train).append(ids[i].data(), ids[i].size());
    ++(held_out ? val_docs : train_docs);
  }
  train.commit();
  val.commit();

  nlohmann::ordered_json meta = {
      {"tokenizer", std::filesystem::absolute(opt.tokenizer).string()},
      {"vocab_size", tok.vocab_size()},
      {"eos_id", tok.eos_id()},
      {"dtype", to_string(dtype)},
      {"corpus", std::filesystem::absolute(opt.corpus).string()},
      {"val_every", every},
      {"train", {{"file", "train.bin"}, {"documents", train_docs}, {"tokens", train.count()}}},
      {"val", {{"file", "val.bin"}, {"documents", val_docs}, {"tokens", val.count()}}},
  };
  write_file_atomically((std::filesystem::path(opt.output_dir) / "data.json").string(),
                        meta.dump(2) + "\n");

  size_t text_bytes = 0;
  for (const auto& d : docs) text_bytes += d.text.size();
  const size_t tokens = train.count() + val.count();
  std::printf("encoded %zu documents (%zu bytes) with %s: %zu tokens, %.2f bytes/token\n",
              docs.size(), text_bytes, opt.tokenizer.c_str(), tokens,
              static_cast<double>(text_bytes) / static_cast<double>(tokens));
  std::printf("%s: %zu documents, %zu tokens (%s)\n", train_path.c_str(), train_docs,
              train.count(), to_string(dtype));
  std::printf("%s: %zu documents, %zu tokens (%s; documents i with i %% %lld == %lld)\n", val_path.c_str(),
              val_docs, val.count(), to_string(dtype), static_cast<long long>(every),
              static_cast<long long>(every - 1));
  std::printf("encoding: %.2f MB/s (%.2f s on %d threads; reading and writing the files not counted)\n",
              static_cast<double>(text_bytes) / 1e6 / encode_s, encode_s, opt.threads);
  std::printf("done in %.1f s on %d threads\n", timer.seconds(), opt.threads);
}

}  // namespace asteria::data_cli
