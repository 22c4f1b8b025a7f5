#pragma once
// Outputs appear under their final names only when complete: they are written to a temporary
// name in the same folder ("<path>.tmp.<pid>") and renamed, which is atomic on POSIX.
#include <string>

namespace asteria::data_cli {

std::string temporary_name(const std::string& path);
// Renames tmp onto path; on failure removes tmp and throws asteria::Error.
void rename_into_place(const std::string& tmp, const std::string& path);
// Writes text to path through a temporary file.
void write_file_atomically(const std::string& path, const std::string& text);
// Creates the folder that will hold path (and its parents) if missing.
void make_parent_dirs(const std::string& path);

}  // namespace asteria::data_cli
