// export-tokenizer: Hugging Face's tokenizer files for a train-tokenizer model
// (data/sentencepiece_to_hf.hpp), as asteria-export writes them beside a model.
#include <cstdio>
#include <filesystem>

#include "commands.hpp"
#include "core/error.hpp"
#include "data/sentencepiece_to_hf.hpp"

namespace asteria::data_cli {

void export_tokenizer(const ExportTokenizerOptions& opt) {
  const HfTokenizerFiles f = sentencepiece_to_hf(opt.tokenizer, opt.max_length);
  std::error_code ec;
  std::filesystem::create_directories(opt.out, ec);
  if (ec) fail("cannot create output folder ", opt.out, ": ", ec.message());
  write_hf_tokenizer_files(f, opt.out);
  std::printf("wrote %s/{tokenizer.json, tokenizer_config.json, special_tokens_map.json}: %s as Hugging Face's "
              "tokenizer (AutoTokenizer.from_pretrained loads the folder)\n",
              opt.out.c_str(), opt.tokenizer.c_str());
}

}  // namespace asteria::data_cli
