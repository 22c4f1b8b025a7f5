#include "output_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"

namespace asteria::data_cli {

std::string temporary_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void rename_into_place(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(e));
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = temporary_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create ", tmp, ": ", std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      fail("cannot write ", tmp, ": ", std::strerror(errno));
    }
  }
  rename_into_place(tmp, path);
}

void make_parent_dirs(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (parent.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) fail("cannot create folder ", parent.string(), ": ", ec.message());
}

}  // namespace asteria::data_cli
