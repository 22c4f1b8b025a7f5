#pragma once
// The checkpoint directories of a run: run.dir/checkpoints/step<8-digit step>/ (docs/DESIGN.md
// "Checkpoints").
//
// Commit protocol (a crash at any instant leaves the previous checkpoints intact and never a
// directory that passes for a checkpoint while incomplete):
//   1. write the files into step<N>.tmp-<pid>-<n>/ and fsync each;
//   2. fsync the temporary directory, rename it to step<N>/, fsync checkpoints/;
//   3. write manifest.json through manifest.json.tmp + fsync + rename + fsync of step<N>/.
// A directory is a checkpoint when its manifest parses (checkpoint_manifest.hpp); its files'
// sizes and checksums are checked when it is loaded. A step<N>/ without a manifest (a crash
// between 2 and 3), and step<N>.tmp-* directories, are stale: removed at startup, and said.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint_manifest.hpp"

namespace asteria {

std::string checkpoint_dir_name(int64_t step);   // "step00000100"
std::string rank_file_name(int rank);            // "rank00003.h5": one per writing rank

// The rank files of a checkpoint directory, in rank order (manifest world_size of them; an
// Error naming the directory when the manifest does not list one).
std::vector<std::string> checkpoint_rank_files(const std::string& dir, const Manifest& manifest);

struct StoredCheckpoint {
  int64_t step = 0;
  std::string dir;
};

// The complete checkpoints under `root` (run.dir/checkpoints), oldest first.
std::vector<StoredCheckpoint> list_checkpoints(const std::string& root);
std::optional<StoredCheckpoint> latest_checkpoint(const std::string& root);

// Removes stale temporaries and manifest-less step directories; returns what it removed.
std::vector<std::string> remove_stale_checkpoints(const std::string& root);

// Runs the commit protocol: write_files(tmp_dir) writes the checkpoint's files and returns their
// names; the manifest gets their sizes and checksums. Replaces an existing step<N>/ (a rerun
// of the same step after a resume). Returns the checkpoint's directory.
std::string commit_checkpoint(const std::string& root, Manifest manifest,
                              const std::function<std::vector<std::string>(const std::string&)>& write_files);

// The protocol's two halves, for files written by several processes (one per rank): a fresh
// temporary directory for step N (step<N>.tmp-<pid>-<n>/, created), and its publication once
// every file in it was written and fsynced (`manifest.files` lists them with sizes and
// checksums): fsync, rename to step<N>/ (replacing one), fsync, manifest. Returns step<N>/.
std::string make_checkpoint_tmp(const std::string& root, int64_t step);
std::string publish_checkpoint(const std::string& root, const std::string& tmp, const Manifest& manifest);

// Keeps the newest `keep` checkpoints and every one whose step is a multiple of keep_every
// (> 0); removes the rest. Returns the removed directories.
std::vector<std::string> apply_retention(const std::string& root, int keep, int64_t keep_every);

// fsync of a file or directory by path (an Error naming it on failure).
void fsync_path(const std::string& path);

// Writes `text` to `path` through path.tmp + fsync + rename + fsync of the directory: a reader
// finds the old file or the whole new one, also after a crash.
void write_text_durably(const std::filesystem::path& path, const std::string& text);

}  // namespace asteria
