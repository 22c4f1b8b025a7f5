// bench_checkpoint: checkpoint write and read rates for the state of a real configuration, with the
// trainer's own checkpoint modules (train/checkpoint_image, checkpoint_manifest, checkpoint_store),
// without training it.
//
// The image is laid out as Checkpointer::lay_out lays it out: one buffer per layer's parameters
// (pieces "params/<entry>"), then one buffer per optimizer state tensor with the optimizer's own
// pieces (Optimizer::state_pieces of an optimizer built with own_memory = false, which allocates no
// state; it is freed before anything is written), sized by optimizer_state_specs; the values
// (train.step, loader.*, optim.counters.*) are the checkpointer's. Nothing model-sized is kept
// besides the image itself. The buffers are
// filled with pseudo-random floats in [-1, 1) (incompressible; HDF5 writes them unfiltered).
//
// State larger than memory (OLMo-1B SOAP: 35.1 GiB on a 24 GiB machine) is written in slices:
// consecutive buffers grouped into images of at most --slice-gib, each written to its own file
// (slice000.h5, ...) of ONE checkpoint, through ONE commit_checkpoint call, so the checkpoint holds
// the whole state; only one slice is in memory at a time. Allocating and filling a slice is timed
// apart and subtracted. With --slice-gib 0 the whole state is one image and one file (rank00000.h5,
// as the trainer writes it).
//
// Timed (seconds; rates in bytes of the checkpoint's files per second):
//   write   commit_checkpoint end to end (what Checkpointer::write_and_commit runs): inside its
//           write_files callback, write_image per file (write_image_s; it starts the writeback as
//           it writes and checksums the closed file from the page cache, checkpoint_image.hpp) and
//           an fsync per file (fsync_s, so the file is on disk when commit's own fsync runs); then
//           the commit's fsync (nothing left to write), file_xxh3 of each file for the manifest,
//           rename, directory fsyncs and manifest (commit_rest_s = write_s - write_image_s -
//           fsync_s). write_rate = file bytes / write_s.
//   hash    file_xxh3 alone, of the last file right after the commit (hash_hot_*: the fraction of
//           its pages in the page cache is printed, from mincore) and of every file after the
//           page cache is dropped (= verify_files' work from disk).
//   read    what Checkpointer::restore runs: (page cache dropped first, --drop-caches) read_manifest
//           + verify_files (sizes and XXH3 of every file), then read_image of every file into an
//           image laid out beforehand (allocating it is timed apart: restore's lay_out). The data
//           read back is compared with what was written (XXH3 of each buffer, untimed).
//           read_rate = file bytes / (verify_s + read_image_s). Then, once more with the page
//           cache dropped, read_image alone (read_image_cold_s): the HDF5 read path from disk.
//
// The page cache is dropped with `sync; echo 3 > /proc/sys/vm/drop_caches` (needs root); whether it
// worked is in the output (drop_caches). OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are printed as found.
//
// Usage: bench_checkpoint --config FILE [--set key=value ...] [--dir DIR] [--slice-gib G]
//                         [--layers A-B] [--drop-caches] [--keep] [--label TEXT] [--layout-only]
//                         [--copy-test]
//   --dir        checkpoint root (run.dir/checkpoints alike; default runs/bench-checkpoint/checkpoints)
//   --slice-gib  at most G GiB of state in memory at once (default 0: one image, one file)
//   --layers     only model layers A..B (0 = embed, 1..N = blocks, N+1 = head): their parameters
//                and optimizer state (a fraction of a big model's state in one file)
//   --keep       leave the checkpoint on disk (default: removed at the end)
//   --layout-only  print the sizes (JSON) and exit: nothing allocated or written
//   --copy-test  also time what the step is held for with checkpoint.async (Checkpointer::capture:
//                one memcpy per buffer from the live state into the image, one thread), into an
//                image laid out before (copy_1thread_s) and into a fresh one (copy_first_s: the
//                first save also allocates and zeroes the image), and the same copy split over
//                all OpenMP threads (copy_parallel_s): needs the state twice in memory
// Output: progress on stderr, one JSON object on stdout.
#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cpu/blas_kernels.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "model/model.hpp"
#include "train/checkpoint/checkpoint_image.hpp"
#include "train/checkpoint/checkpoint_manifest.hpp"
#include "train/checkpoint/checkpoint_store.hpp"
#include "config/config.hpp"
#include "optim/optimizer_factory.hpp"

namespace fs = std::filesystem;
using namespace asteria;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct BufferSpec {
  std::vector<StatePiece> pieces;
  size_t count = 0;   // floats
  int layer = 0;
  uint64_t checksum = 0;   // XXH3 of the data written
};

uint64_t splitmix(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Pseudo-random floats in [-1, 1), a function of (buffer id, index): every run writes the same data.
void fill(std::vector<float>& v, uint64_t id) {
  const size_t n = v.size(), chunk = size_t{1} << 16;
#pragma omp parallel for schedule(static)
  for (size_t c = 0; c < (n + chunk - 1) / chunk; ++c) {
    uint64_t s = id * 0x100000001b3ull + c;
    const size_t end = std::min(n, (c + 1) * chunk);
    for (size_t i = c * chunk; i < end; i += 2) {
      const uint64_t r = splitmix(s);
      v[i] = static_cast<float>(static_cast<int32_t>(r >> 32)) * (1.0f / 2147483648.0f);
      if (i + 1 < end) v[i + 1] = static_cast<float>(static_cast<int32_t>(r & 0xffffffffu)) * (1.0f / 2147483648.0f);
    }
  }
}

bool drop_caches() {
  sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3\n";
  f.flush();
  return static_cast<bool>(f);
}

// Fraction of a file's pages in the page cache (mincore of a read-only mapping).
double cached_fraction(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  struct stat st {};
  fstat(fd, &st);
  if (st.st_size == 0) {
    close(fd);
    return 1;
  }
  void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return -1;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((static_cast<size_t>(st.st_size) + page - 1) / page);
  double frac = -1;
  if (mincore(p, static_cast<size_t>(st.st_size), vec.data()) == 0) {
    size_t in = 0;
    for (unsigned char c : vec) in += c & 1;
    frac = static_cast<double>(in) / static_cast<double>(vec.size());
  }
  munmap(p, static_cast<size_t>(st.st_size));
  return frac;
}

std::string env_or(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v ? v : dflt;
}

void usage() {
  std::fprintf(stderr,
               "usage: bench_checkpoint --config FILE [--set key=value ...] [--dir DIR] [--slice-gib G] "
               "[--layers A-B] [--drop-caches] [--keep] [--label TEXT] [--layout-only] [--copy-test]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  // The right BLAS kernels for this CPU, before any BLAS call (core/cpu/blas_kernels.hpp).
  if (const std::string line = asteria::ensure_blas_kernels(argv, true); !line.empty()) std::fprintf(stderr, "%s\n", line.c_str());
  std::string config_path, root = "runs/bench-checkpoint/checkpoints", label;
  std::vector<std::string> overrides;
  double slice_gib = 0;
  int layer_lo = -1, layer_hi = -1;
  bool want_drop = false, keep = false, layout_only = false, copy_test = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--config") config_path = next();
    else if (a == "--set") overrides.push_back(next());
    else if (a == "--dir") root = next();
    else if (a == "--slice-gib") slice_gib = std::atof(next().c_str());
    else if (a == "--layers") {
      const std::string r = next();
      if (std::sscanf(r.c_str(), "%d-%d", &layer_lo, &layer_hi) != 2) usage();
    } else if (a == "--drop-caches") want_drop = true;
    else if (a == "--keep") keep = true;
    else if (a == "--layout-only") layout_only = true;
    else if (a == "--copy-test") copy_test = true;
    else if (a == "--label") label = next();
    else usage();
  }
  if (config_path.empty()) usage();

  try {
    const Config cfg = load_config(config_path, overrides);
    const std::string coretype = env_or("OPENBLAS_CORETYPE", "(unset)"), l2 = env_or("OPENBLAS_L2_SIZE", "(unset)");
    std::fprintf(stderr, "[bench_checkpoint] OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n", coretype.c_str(), l2.c_str());

    // The image's layout, as Checkpointer::lay_out makes it.
    const std::vector<ParamTable> tables = model_param_tables(cfg.model);
    const int L = static_cast<int>(tables.size());
    if (layer_lo < 0) layer_lo = 0, layer_hi = L - 1;
    if (layer_lo > layer_hi || layer_hi >= L) fail("--layers: the model has layers 0-", L - 1);
    // The optimizer only names the pieces and counters; it binds no state (own_memory false), but
    // its blocks allocate their update buffers (rows x cols each, not state: 4.4 GiB for OLMo-1B),
    // so it is freed once they are read.
    std::unique_ptr<Optimizer> opt = make_optimizer(cfg.optim, tables, false, /*own_memory=*/false);
    const std::vector<std::vector<StateSpec>> specs = optimizer_state_specs(cfg.optim, tables);
    std::vector<BufferSpec> bufs;
    size_t param_floats = 0, state_floats = 0, pieces = 0;
    for (int l = layer_lo; l <= layer_hi; ++l) {
      BufferSpec b;
      for (const ParamEntry& e : tables[l].entries) b.pieces.push_back({state_piece_name("params", e.name), e.shape, e.offset, {}});
      b.count = tables[l].numel;
      b.layer = l;
      param_floats += b.count;
      if (b.count) bufs.push_back(std::move(b));
    }
    for (int l = layer_lo; l <= layer_hi; ++l) {
      std::vector<std::vector<StatePiece>> ps = opt->state_pieces(l);
      ASTERIA_CHECK(ps.size() == specs[l].size(), "layer ", l, ": ", ps.size(), " state tensors have pieces, ",
                    specs[l].size(), " specs");
      for (size_t k = 0; k < ps.size(); ++k) {
        BufferSpec b;
        b.pieces = std::move(ps[k]);
        b.count = specs[l][k].count;
        b.layer = l;
        state_floats += b.count;
        bufs.push_back(std::move(b));
      }
    }
    for (const BufferSpec& b : bufs) pieces += b.pieces.size();
    std::map<std::string, std::vector<double>> values;
    values["train.step"] = {1};
    values["train.tokens"] = {1};
    values["train.elapsed_s"] = {1};
    values["loader.position"] = {0, 1};
    values["loader.seed"] = {0, static_cast<double>(cfg.seed)};
    values["loader.instances"] = {1};
    for (const OptimizerCounters& c : opt->counters()) {
      std::string key = c.name;
      for (char& ch : key)
        if (ch == '/') ch = ':';
      values["optim.counters." + key] = {c.values.begin(), c.values.end()};
    }

    opt.reset();

    // Slices: consecutive buffers, at most slice_gib each (a bigger buffer is a slice of its own).
    std::vector<std::vector<size_t>> slices;
    const double slice_bytes = slice_gib * kGiB;
    double in_slice = 0;
    for (size_t i = 0; i < bufs.size(); ++i) {
      const double b = static_cast<double>(bufs[i].count) * sizeof(float);
      if (slices.empty() || (slice_gib > 0 && in_slice + b > slice_bytes && !slices.back().empty())) {
        slices.emplace_back();
        in_slice = 0;
      }
      slices.back().push_back(i);
      in_slice += b;
    }
    const bool sliced = slices.size() > 1;
    auto file_name = [&](size_t k) {
      if (!sliced) return std::string("rank00000.h5");
      char buf[32];
      std::snprintf(buf, sizeof buf, "slice%03zu.h5", k);
      return std::string(buf);
    };
    const double state_bytes = static_cast<double>(param_floats + state_floats) * sizeof(float);
    std::fprintf(stderr,
                 "[bench_checkpoint] %s: layers %d-%d of %d, params %.3f GiB + optimizer state %.3f GiB = %.3f GiB in "
                 "%zu buffers (%zu pieces), %zu file(s)\n",
                 config_path.c_str(), layer_lo, layer_hi, L, param_floats * 4 / kGiB, state_floats * 4 / kGiB,
                 state_bytes / kGiB, bufs.size(), pieces, slices.size());

    if (layout_only) {
      std::cout << nlohmann::json{{"bench", "checkpoint-layout"}, {"config", config_path}, {"layers", {layer_lo, layer_hi}},
                                  {"param_bytes", param_floats * sizeof(float)},
                                  {"optimizer_state_bytes", state_floats * sizeof(float)},
                                  {"state_bytes", (param_floats + state_floats) * sizeof(float)},
                                  {"buffers", bufs.size()}, {"pieces", pieces}, {"files", slices.size()}}
                       .dump()
                << std::endl;
      return 0;
    }

    // An image of slice k: laid out (allocated, zeroed, as lay_out does), optionally filled.
    auto make_image = [&](size_t k, bool with_data) {
      CheckpointImage img;
      for (size_t i : slices[k]) {
        ImageBuffer b;
        b.pieces = bufs[i].pieces;
        b.data.resize(bufs[i].count);
        if (with_data) {
          fill(b.data, i + 1);
          bufs[i].checksum = XXH3_64bits(b.data.data(), b.data.size() * sizeof(float));
        }
        img.buffers.push_back(std::move(b));
      }
      if (k == 0) img.values = values;
      else img.values["slice"] = {static_cast<double>(k)};
      return img;
    };

    fs::create_directories(root);
    for (const StoredCheckpoint& c : list_checkpoints(root)) fs::remove_all(c.dir);
    remove_stale_checkpoints(root);
    Manifest manifest;
    manifest.step = 1;
    manifest.config = config_to_yaml(cfg);
    manifest.config_hash = text_xxh3(manifest.config);

    // --- write
    if (want_drop) drop_caches();
    double prep_s = 0, write_image_s = 0, fsync_s = 0;
    std::vector<double> cached_before_hash;
    Timer tw;
    const std::string dir = commit_checkpoint(root, manifest, [&](const std::string& tmp) {
      std::vector<std::string> names;
      for (size_t k = 0; k < slices.size(); ++k) {
        const std::string path = (fs::path(tmp) / file_name(k)).string();
        Timer tp;
        {
          CheckpointImage img = make_image(k, true);
          prep_s += tp.seconds();
          Timer t1;
          write_image(path, img);
          write_image_s += t1.seconds();
          Timer t2;
          fsync_path(path);
          fsync_s += t2.seconds();
          tp.reset();
        }   // freed
        prep_s += tp.seconds();
        names.push_back(file_name(k));
        std::fprintf(stderr, "[bench_checkpoint] wrote %s\n", names.back().c_str());
      }
      Timer tc;
      for (const std::string& n : names) cached_before_hash.push_back(cached_fraction((fs::path(tmp) / n).string()));
      prep_s += tc.seconds();
      return names;
    });
    const double write_s = tw.seconds() - prep_s;
    const Manifest written = read_manifest((fs::path(dir) / "manifest.json").string());
    double file_bytes = 0;
    for (const ManifestFile& f : written.files) file_bytes += static_cast<double>(f.bytes);
    const double commit_rest_s = write_s - write_image_s - fsync_s;
    std::fprintf(stderr,
                 "[bench_checkpoint] write: %.3f GB in %.2f s = %.1f MB/s (write_image %.2f s, fsync %.2f s, commit "
                 "rest %.2f s: xxh3 read-back, rename, manifest; prepare, untimed, %.2f s)\n",
                 file_bytes / 1e9, write_s, file_bytes / write_s / 1e6, write_image_s, fsync_s, commit_rest_s, prep_s);

    // --- file_xxh3 alone
    const std::string last = (fs::path(dir) / written.files.back().name).string();
    const double last_bytes = static_cast<double>(written.files.back().bytes);
    const double hot_cached = cached_fraction(last);
    Timer th;
    const std::string h_hot = file_xxh3(last);
    const double hash_hot_s = th.seconds();
    ASTERIA_CHECK(h_hot == written.files.back().xxh3, "file_xxh3 disagrees with the manifest");
    const bool dropped = want_drop && drop_caches();
    double hash_cold_s = 0;
    {
      Timer t;
      for (const ManifestFile& f : written.files) file_xxh3((fs::path(dir) / f.name).string());
      hash_cold_s = t.seconds();
    }
    std::fprintf(stderr, "[bench_checkpoint] file_xxh3: %.1f MB/s of the last file (%.0f %% of it cached), %.1f MB/s "
                 "of all files %s\n", last_bytes / hash_hot_s / 1e6, 100 * hot_cached, file_bytes / hash_cold_s / 1e6,
                 dropped ? "after drop_caches" : "(page cache not dropped)");

    // --- read (restore's work)
    if (want_drop) drop_caches();
    double verify_s = 0, read_image_s = 0, alloc_s = 0;
    {
      Timer t;
      const Manifest m = read_manifest((fs::path(dir) / "manifest.json").string());
      verify_files(dir, m);
      verify_s = t.seconds();
    }
    auto read_all = [&](double& read_s, double& alloc) {
      for (size_t k = 0; k < slices.size(); ++k) {
        Timer ta;
        CheckpointImage img = make_image(k, false);
        alloc += ta.seconds();
        Timer tr;
        read_image((fs::path(dir) / file_name(k)).string(), img);
        read_s += tr.seconds();
        for (size_t j = 0; j < slices[k].size(); ++j) {
          const std::vector<float>& d = img.buffers[j].data;
          ASTERIA_CHECK(XXH3_64bits(d.data(), d.size() * sizeof(float)) == bufs[slices[k][j]].checksum,
                        "buffer ", slices[k][j], " read back differs from what was written");
        }
        if (k == 0)
          ASTERIA_CHECK(img.values == values, "the values read back differ from those written");
        ta.reset();
        img = CheckpointImage{};
        alloc += ta.seconds();
      }
    };
    read_all(read_image_s, alloc_s);
    const double read_s = verify_s + read_image_s;
    std::fprintf(stderr, "[bench_checkpoint] read: %.2f s = %.1f MB/s (verify_files %.2f s, read_image %.2f s; "
                 "laying out the image, untimed, %.2f s)\n", read_s, file_bytes / read_s / 1e6, verify_s, read_image_s,
                 alloc_s);
    double read_cold_s = 0, alloc2 = 0;
    const bool dropped2 = want_drop && drop_caches();
    read_all(read_cold_s, alloc2);
    std::fprintf(stderr, "[bench_checkpoint] read_image alone %s: %.2f s = %.1f MB/s\n",
                 dropped2 ? "after drop_caches" : "(page cache not dropped)", read_cold_s, file_bytes / read_cold_s / 1e6);

    if (!keep) fs::remove_all(dir);

    // --- the async hold: copying the state into the image
    nlohmann::json copy = nullptr;
    if (copy_test) {
      ASTERIA_CHECK(!sliced, "--copy-test needs the state in one image (--slice-gib 0)");
      const CheckpointImage src = make_image(0, true);
      auto copy_into = [&](CheckpointImage& dst, bool parallel) {
        Timer t;
        if (!parallel) {
          for (size_t j = 0; j < src.buffers.size(); ++j)
            std::memcpy(dst.buffers[j].data.data(), src.buffers[j].data.data(), src.buffers[j].data.size() * sizeof(float));
        } else {   // one parallel loop over 1 MiB pieces of every buffer
          struct Part {
            float* to;
            const float* from;
            size_t n;
          };
          std::vector<Part> parts;
          const size_t chunk = size_t{1} << 18;
          for (size_t j = 0; j < src.buffers.size(); ++j)
            for (size_t o = 0; o < src.buffers[j].data.size(); o += chunk)
              parts.push_back({dst.buffers[j].data.data() + o, src.buffers[j].data.data() + o,
                               std::min(chunk, src.buffers[j].data.size() - o)});
#pragma omp parallel for schedule(static)
          for (size_t k = 0; k < parts.size(); ++k) std::memcpy(parts[k].to, parts[k].from, parts[k].n * sizeof(float));
        }
        return t.seconds();
      };
      double first_s = 0;
      CheckpointImage dst;
      {
        Timer t;
        dst = make_image(0, false);   // lay_out at the first save
        first_s = t.seconds();
        first_s += copy_into(dst, false);
      }
      std::vector<double> one, par;
      for (int r = 0; r < 5; ++r) {
        one.push_back(copy_into(dst, false));
        par.push_back(copy_into(dst, true));
      }
      std::sort(one.begin(), one.end());
      std::sort(par.begin(), par.end());
      copy = {{"copy_first_s", first_s}, {"copy_1thread_s", one[2]}, {"copy_parallel_s", par[2]},
              {"threads", omp_get_max_threads()}, {"repeats", 5}};
      std::fprintf(stderr, "[bench_checkpoint] copy of the state into the image: %.3f s one thread (median of 5), "
                   "%.3f s on %d threads, %.3f s at the first save (allocating the image)\n", one[2], par[2],
                   omp_get_max_threads(), first_s);
    }

    nlohmann::json j = {
        {"bench", "checkpoint"}, {"label", label}, {"config", config_path}, {"overrides", overrides},
        {"OPENBLAS_CORETYPE", coretype}, {"OPENBLAS_L2_SIZE", l2},
        {"layers", {layer_lo, layer_hi}}, {"model_layers", L},
        {"param_bytes", param_floats * sizeof(float)}, {"optimizer_state_bytes", state_floats * sizeof(float)},
        {"buffers", bufs.size()}, {"pieces", pieces}, {"files", slices.size()},
        {"slice_gib", slice_gib}, {"file_bytes", file_bytes},
        {"drop_caches", want_drop ? (dropped ? "done" : "failed") : "not asked"},
        {"write_s", write_s}, {"write_image_s", write_image_s}, {"fsync_s", fsync_s},
        {"commit_rest_s", commit_rest_s}, {"prepare_untimed_s", prep_s},
        {"cached_fraction_before_commit_hash", cached_before_hash},
        {"write_rate_Bps", file_bytes / write_s},
        {"hash_hot_s", hash_hot_s}, {"hash_hot_bytes", last_bytes}, {"hash_hot_cached_fraction", hot_cached},
        {"hash_hot_rate_Bps", last_bytes / hash_hot_s},
        {"hash_cold_s", hash_cold_s}, {"hash_cold_rate_Bps", file_bytes / hash_cold_s},
        {"verify_s", verify_s}, {"read_image_s", read_image_s}, {"read_s", read_s},
        {"read_rate_Bps", file_bytes / read_s}, {"layout_untimed_s", alloc_s},
        {"read_image_cold_s", read_cold_s}, {"read_image_cold_rate_Bps", file_bytes / read_cold_s},
        {"kept", keep ? dir : ""}, {"copy_test", copy}};
    std::cout << j.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_checkpoint: %s\n", e.what());
    return 1;
  }
}
