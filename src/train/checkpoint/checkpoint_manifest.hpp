#pragma once
// manifest.json of a checkpoint directory (docs/DESIGN.md "Checkpoints"): written last, so a
// directory without a valid manifest is not a checkpoint.
//
//   {"format_version": 1, "step": N, "tokens": T, "world_size": W, "elapsed_s": S,
//    "config": "<the resolved config, YAML>", "config_hash": "<xxh3 of it, 16 hex digits>",
//    "data": [{"role": "train", "path": P, "bytes": B, "fingerprint": "<16 hex>"}, ...],
//    "files": [{"name": "rank00000.h5", "bytes": B, "xxh3": "<16 hex>"}, ...]}
//
// Every file a checkpoint holds is listed with its size and XXH3-64 checksum; verify_files
// checks them before anything is loaded.
#include <cstdint>
#include <string>
#include <vector>

namespace asteria {

constexpr int kCheckpointFormatVersion = 1;

struct ManifestFile {
  std::string name;
  uint64_t bytes = 0;
  std::string xxh3;
};

struct DataFingerprint {
  std::string role;         // "train"
  std::string path;
  uint64_t bytes = 0;
  std::string fingerprint;  // token_file_fingerprint
};

struct Manifest {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;
  int64_t tokens = 0;
  int world_size = 1;
  double elapsed_s = 0;
  std::string config;       // resolved YAML
  std::string config_hash;
  std::vector<DataFingerprint> data;
  std::vector<ManifestFile> files;
};

std::string manifest_json(const Manifest& m);
// Parses and checks a manifest (known format version, every field present with its type); an
// Error naming `path` and the field otherwise.
Manifest parse_manifest(const std::string& text, const std::string& path);
Manifest read_manifest(const std::string& path);

// XXH3-64 of a file's bytes / of a string, as 16 hex digits.
std::string file_xxh3(const std::string& path);
std::string text_xxh3(const std::string& text);

// For a file just written (write_image): starts writing its dirty pages back (sync_file_range),
// computes its XXH3 from the page cache meanwhile, and remembers it for the next file_xxh3 of the
// same path, which returns it without reading the file again when the file is unchanged (same
// device, inode, size, mtime and ctime) and forgets it. Returns the checksum. verify_files never
// uses a remembered checksum: it always reads the files.
std::string remember_file_xxh3(const std::string& path);

// Every file of the manifest exists in `dir` with its size and checksum; an Error naming the
// file and what differs otherwise.
void verify_files(const std::string& dir, const Manifest& m);

// A token file's identity, cheap at any size: its byte count and XXH3 over 64 evenly spaced
// 64 KiB windows (the whole file when smaller than 4 MiB).
DataFingerprint token_file_fingerprint(const std::string& role, const std::string& path);

}  // namespace asteria
