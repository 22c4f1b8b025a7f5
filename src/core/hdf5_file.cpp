#include "core/hdf5_file.hpp"

#include <fcntl.h>
#include <hdf5.h>

#include <algorithm>

#include "core/error.hpp"

namespace asteria {

namespace {

// HDF5 prints its own error stack by default; our messages say what went wrong instead.
struct SilenceHdf5 {
  SilenceHdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }
};
const SilenceHdf5 silence_hdf5;

// Does every group on the way to `path` exist (H5Lexists needs that for nested paths)?
bool path_exists(hid_t file, const std::string& path) {
  if (path == "/" || path.empty()) return true;
  size_t pos = 0;
  while ((pos = path.find('/', pos + 1)) != std::string::npos) {
    if (H5Lexists(file, path.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

}  // namespace

Hdf5File::Hdf5File(const std::string& path, Mode mode) : path_(path) {
  if (mode == Mode::Read) {
    if (H5Fis_hdf5(path.c_str()) <= 0) fail("'", path, "' is missing or not an HDF5 file");
    file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  } else {
    file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  }
  if (file_ < 0) fail("cannot ", mode == Mode::Read ? "open" : "create", " HDF5 file '", path, "'");
}

Hdf5File::~Hdf5File() {
  if (file_ >= 0) H5Fclose(file_);
}

void Hdf5File::flush() {
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) fail("cannot flush '", path_, "'");
}

void Hdf5File::start_writeback() {
  const hid_t fapl = H5Fget_access_plist(file_);
  const bool sec2 = fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2;
  if (fapl >= 0) H5Pclose(fapl);
  void* handle = nullptr;
  if (!sec2 || H5Fget_vfd_handle(file_, H5P_DEFAULT, &handle) < 0 || !handle) return;
  sync_file_range(*static_cast<int*>(handle), 0, 0, SYNC_FILE_RANGE_WRITE);   // advisory: errors show at fsync
}

bool Hdf5File::exists(const std::string& object) const { return path_exists(file_, object); }

std::vector<std::string> Hdf5File::members(const std::string& group) const {
  std::vector<std::string> names;
  if (!exists(group)) return names;
  hid_t g = H5Gopen2(file_, group.c_str(), H5P_DEFAULT);
  if (g < 0) fail(path_, ": '", group, "' is not a group");
  hsize_t idx = 0;
  H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &idx, collect_name, &names);
  H5Gclose(g);
  std::sort(names.begin(), names.end());
  return names;
}

Hdf5Array Hdf5File::read(const std::string& dataset) const {
  if (!exists(dataset)) fail(path_, ": dataset '", dataset, "' is missing");
  hid_t d = H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT);
  if (d < 0) fail(path_, ": '", dataset, "' is not a dataset");
  hid_t type = H5Dget_type(d);
  const bool is_float = H5Tget_class(type) == H5T_FLOAT;
  H5Tclose(type);
  hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  Hdf5Array a;
  if (!is_float || rank < 0) {
    H5Sclose(space);
    H5Dclose(d);
    fail(path_, ": dataset '", dataset, "' must hold float32 or float64 values");
  }
  std::vector<hsize_t> dims(rank);
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  size_t n = 1;
  for (hsize_t x : dims) {
    a.shape.push_back(static_cast<int64_t>(x));
    n *= x;
  }
  a.data.resize(n);
  herr_t st = n ? H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()) : 0;
  H5Sclose(space);
  H5Dclose(d);
  if (st < 0) fail(path_, ": cannot read dataset '", dataset, "'");
  return a;
}

std::vector<int64_t> Hdf5File::shape(const std::string& dataset) const {
  if (!exists(dataset)) fail(path_, ": dataset '", dataset, "' is missing");
  hid_t d = H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT);
  if (d < 0) fail(path_, ": '", dataset, "' is not a dataset");
  hid_t space = H5Dget_space(d);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  H5Dclose(d);
  if (rank < 0) fail(path_, ": cannot read the shape of '", dataset, "'");
  return std::vector<int64_t>(dims.begin(), dims.end());
}

namespace {

void read_dataset(hid_t file, const std::string& path, const std::string& dataset, void* out, size_t count,
                  hid_t mem_type, size_t have) {
  if (have != count)
    fail(path, ": dataset '", dataset, "' holds ", have, " values, expected ", count);
  hid_t d = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  hid_t type = H5Dget_type(d);
  const bool is_float = H5Tget_class(type) == H5T_FLOAT;
  H5Tclose(type);
  herr_t st = is_float && count ? H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) : 0;
  H5Dclose(d);
  if (!is_float) fail(path, ": dataset '", dataset, "' must hold float32 or float64 values");
  if (st < 0) fail(path, ": cannot read dataset '", dataset, "' (truncated or corrupt file?)");
}

size_t element_count(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t x : shape) n *= static_cast<size_t>(x);
  return n;
}

}  // namespace

void Hdf5File::read(const std::string& dataset, float* out, size_t count) const {
  read_dataset(file_, path_, dataset, out, count, H5T_NATIVE_FLOAT, element_count(shape(dataset)));
}

void Hdf5File::read(const std::string& dataset, double* out, size_t count) const {
  read_dataset(file_, path_, dataset, out, count, H5T_NATIVE_DOUBLE, element_count(shape(dataset)));
}

bool Hdf5File::is_dataset(const std::string& object) const {
  if (!exists(object)) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(file_, object.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_DATASET;
}

void Hdf5File::read_rows(const std::string& dataset, int64_t row0, int64_t rows, float* out) const {
  const std::vector<int64_t> dims = shape(dataset);
  if (dims.size() != 2 || row0 < 0 || rows < 0 || row0 + rows > dims[0])
    fail(path_, ": dataset '", dataset, "' has no rows ", row0, "-", row0 + rows - 1, " (it is not a matrix of at least ",
         row0 + rows, " rows)");
  if (rows == 0) return;
  hid_t d = H5Dopen2(file_, dataset.c_str(), H5P_DEFAULT);
  hid_t space = H5Dget_space(d);
  const hsize_t start[2] = {static_cast<hsize_t>(row0), 0}, count[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(dims[1])};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(2, count, nullptr);
  const herr_t st = H5Dread(d, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, out);
  H5Sclose(mem);
  H5Sclose(space);
  H5Dclose(d);
  if (st < 0) fail(path_, ": cannot read rows of dataset '", dataset, "' (truncated or corrupt file?)");
}

namespace {

template <class T>
void write_dataset(hid_t file, const std::string& path, const std::string& dataset,
                   const std::vector<int64_t>& shape, const T* data, hid_t mem_type, hid_t file_type) {
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t d = H5Dcreate2(file, dataset.c_str(), file_type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
  herr_t st = d >= 0 ? H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : -1;
  if (d >= 0) H5Dclose(d);
  H5Sclose(space);
  H5Pclose(lcpl);
  if (st < 0) fail(path, ": cannot write dataset '", dataset, "'");
}

}  // namespace

void Hdf5File::write(const std::string& dataset, const std::vector<int64_t>& shape, const double* data) {
  write_dataset(file_, path_, dataset, shape, data, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE);
}

void Hdf5File::write(const std::string& dataset, const std::vector<int64_t>& shape, const float* data) {
  write_dataset(file_, path_, dataset, shape, data, H5T_NATIVE_FLOAT, H5T_IEEE_F32LE);
}

}  // namespace asteria
