#pragma once
// A small RAII layer over the HDF5 C API: open/create a file, list a group, read a dataset
// as float64 with its shape, write a float64 dataset (creating parent groups). Errors are
// asteria::Error naming the file and the dataset. Object names may contain dots.
#include <cstdint>
#include <string>
#include <vector>

namespace asteria {

struct Hdf5Array {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

class Hdf5File {
 public:
  enum class Mode { Read, Create };   // Create truncates
  Hdf5File(const std::string& path, Mode mode);
  ~Hdf5File();
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  const std::string& path() const { return path_; }
  bool exists(const std::string& object) const;            // "/grads/000001/w"
  std::vector<std::string> members(const std::string& group) const;   // sorted names
  Hdf5Array read(const std::string& dataset) const;
  // The dataset's shape (an Error naming the file when it is missing).
  std::vector<int64_t> shape(const std::string& dataset) const;
  // Reads the dataset into `out`, which holds `count` values: an Error naming the file and the
  // dataset when it is missing, not floating point, or of another size.
  void read(const std::string& dataset, float* out, size_t count) const;
  void read(const std::string& dataset, double* out, size_t count) const;
  bool is_dataset(const std::string& object) const;       // exists and is a dataset (not a group)
  // Rows [row0, row0 + rows) of a 2-D float dataset into `out` (rows x its columns).
  void read_rows(const std::string& dataset, int64_t row0, int64_t rows, float* out) const;
  void write(const std::string& dataset, const std::vector<int64_t>& shape, const double* data);
  void write(const std::string& dataset, const std::vector<int64_t>& shape, const float* data);
  void flush();
  // Starts writing the file's dirty pages to disk and returns (sync_file_range WRITE; it may wait
  // while the disk's request queue is full), so the disk works while the caller goes on writing.
  // Durability still needs fsync. Does nothing for a file not on the default (sec2) driver.
  void start_writeback();

 private:
  std::string path_;
  int64_t file_ = -1;   // hid_t
};

}  // namespace asteria
