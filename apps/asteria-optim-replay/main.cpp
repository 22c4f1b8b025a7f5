// asteria-optim-replay: applies a config's optimizer to a recorded gradient sequence, so that
// the C++ optimizers can be checked against any other implementation.
//
//   asteria-optim-replay --config OPT.yaml --input IN.h5 --output OUT.h5 [--set key=value ...]
//
// IN.h5:  /init/<name>              initial values (1-D: a vector, updated by AdamW; 2-D: a
//                                    matrix, preconditioned by shampoo/soap/kl_shampoo and
//                                    orthogonalized by muon; a 2-D name holding "embed", "wte" or
//                                    "lm_head" is an embedding: muon's AdamW steps it)
//         /grads/<step>/<name>      gradient at step 1, 2, ... (six digits: 000001)
// OUT.h5: /params/<step>/<name>     values after each step, float64
// float32 or float64 datasets; names may contain dots. The optim section is applied with its
// constant lr: no schedule, no clipping. The optimizer state is fp32 as in training.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "core/cpu/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/hdf5_file.hpp"
#include "config/config.hpp"
#include "optim/optimizer_factory.hpp"

namespace {

std::string step_name(int64_t s) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(s));
  return buf;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

void replay(const asteria::Config& cfg, const std::string& input, const std::string& output) {
  using namespace asteria;
  Hdf5File in(input, Hdf5File::Mode::Read);
  const std::vector<std::string> names = in.members("/init");
  if (names.empty()) fail(input, ": no parameters under /init");
  std::vector<ParamTable> tables;
  std::vector<std::vector<float>> params;
  for (const std::string& name : names) {
    Hdf5Array a = in.read("/init/" + name);
    if (a.shape.size() != 1 && a.shape.size() != 2)
      fail(input, ": dataset '/init/", name, "' has shape ", shape_text(a.shape), "; parameters are 1-D or 2-D");
    ParamTable t;
    const bool embedding = name.find("embed") != std::string::npos || name.find("wte") != std::string::npos ||
                           name.find("lm_head") != std::string::npos;
    t.add(name, a.shape,
          a.shape.size() == 1 ? ParamClass::Norm : (embedding ? ParamClass::Embedding : ParamClass::Matrix));
    tables.push_back(std::move(t));
    params.emplace_back(a.data.begin(), a.data.end());
  }
  const std::vector<std::string> steps = in.members("/grads");
  if (steps.empty()) fail(input, ": no gradients under /grads");
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i] != step_name(static_cast<int64_t>(i + 1)))
      fail(input, ": gradient steps must be /grads/000001, /grads/000002, ... without gaps; step ",
           step_name(static_cast<int64_t>(i + 1)), " is missing (found '/grads/", steps[i], "')");

  std::unique_ptr<Optimizer> opt = make_optimizer(cfg.optim, tables);
  const std::string tmp = output + ".tmp";
  {
    Hdf5File out(tmp, Hdf5File::Mode::Create);
    std::vector<float> grad;
    std::vector<double> wide;
    for (int64_t s = 1; s <= static_cast<int64_t>(steps.size()); ++s) {
      for (size_t p = 0; p < names.size(); ++p) {
        const std::string ds = "/grads/" + step_name(s) + "/" + names[p];
        Hdf5Array g = in.read(ds);
        if (g.shape != tables[p].entries[0].shape)
          fail(input, ": dataset '", ds, "' has shape ", shape_text(g.shape), " but the parameter is ",
               shape_text(tables[p].entries[0].shape));
        grad.assign(g.data.begin(), g.data.end());
        opt->step_layer(static_cast<int>(p), params[p].data(), grad.data(), 1.0f, cfg.optim.lr, s);
        wide.assign(params[p].begin(), params[p].end());
        out.write("/params/" + step_name(s) + "/" + names[p], tables[p].entries[0].shape, wide.data());
      }
    }
    out.flush();
  }
  std::filesystem::rename(tmp, output);
  std::printf("replayed %zu steps of %zu parameters with %s into %s\n", steps.size(), names.size(),
              asteria::to_string(cfg.optim.name), output.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  // The right BLAS kernels for this CPU, before any BLAS call (core/cpu/blas_kernels.hpp).
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  CLI::App app{"asteria-optim-replay: apply a config's optimizer to recorded gradients (HDF5)"};
  std::string config, input, output;
  std::vector<std::string> overrides;
  app.add_option("--config,-c", config, "YAML config whose optim section is applied")->required();
  app.add_option("--input,-i", input, "HDF5 file with /init/<name> and /grads/<step>/<name>")->required();
  app.add_option("--output,-o", output, "HDF5 file to write /params/<step>/<name>")->required();
  app.add_option("--set,-s", overrides, "override a config key: dotted.key=value (repeatable)");
  CLI11_PARSE(app, argc, argv);
  try {
    asteria::Config cfg = asteria::load_config(config, overrides);
    replay(cfg, input, output);
    return 0;
  } catch (const asteria::Error& e) {
    std::filesystem::remove(output + ".tmp");
    std::fprintf(stderr, "asteria-optim-replay: error: %s\n", e.what());
    return 1;
  }
}
