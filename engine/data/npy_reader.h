// NumPy .npy arrays: the header parser (magic, version 1/2/3, the dict with descr, fortran_order and
// shape) and a reader for .npy files. Every size a header claims is checked against the bytes that
// are there before anything is allocated; a malformed header is a lathe::DataError that names the
// file (or the .npz member) and says what is wrong. Little-endian and single-byte types only:
// u1, i1, <u2, <i2, <u4, <i4, <u8, <i8, <f4, <f8; C order only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

enum class NpyDtype { u8, s8, u16, s16, u32, s32, u64, s64, f32, f64 };

/// "uint8", "float32", ... (NumPy's names).
const char* npy_dtype_name(NpyDtype t);
size_t npy_dtype_size(NpyDtype t);

/// What a .npy header says: the element type, the shape (C order) and where the data starts.
struct NpyHeader {
  NpyDtype dtype = NpyDtype::u8;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // bytes from the start of the file to the first element
  int64_t count() const;   // product of shape (1 for a 0-d array)
  size_t data_bytes() const { return static_cast<size_t>(count()) * npy_dtype_size(dtype); }
};

/// The smallest number of leading bytes npy_header_size needs (magic, version and the length field).
inline constexpr size_t kNpyPreambleBytes = 12;

/// From the first `available` bytes (at least 10, or the whole file when shorter): the size of the
/// whole header, i.e. where the data starts. Throws DataError naming `name` for a wrong magic
/// string, an unknown version or a header longer than `total_bytes`.
size_t npy_header_size(const uint8_t* bytes, size_t available, size_t total_bytes, const std::string& name);

/// Parses the header in bytes[0, header_size) (header_size from npy_header_size) and checks that
/// the data it claims is exactly `total_bytes - header_size` bytes. DataError naming `name` for a
/// malformed dict, an unknown or big-endian descr, fortran_order True, a bad shape, or a size mismatch.
NpyHeader parse_npy_header(const uint8_t* bytes, size_t header_size, size_t total_bytes, const std::string& name);

/// An array in memory: the header and its raw little-endian elements.
struct NpyArray {
  NpyHeader header;           ///< as read: shape[0] is the number of records read when only the first were asked for
  std::vector<uint8_t> data;  // header.data_bytes() bytes
  /// shape[0] as the file declares it (the same as header.shape[0] unless only the first records were
  /// read; 1 for a 0-d array).
  int64_t file_records = 0;
  /// Element i as a double / an int64 (integers exactly; floats truncated toward zero in as_int,
  /// saturated at the int64 range, NaN as 0).
  double as_double(int64_t i) const;
  int64_t as_int(int64_t i) const;
  bool is_integer() const;
};

/// Reads a .npy file. DataError naming `path` for a missing or unreadable file and everything the
/// header checks reject. `max_records` >= 0 reads only the first min(max_records, shape[0]) records
/// (rows along the first dimension; the header is still checked against the whole file's size);
/// -1 (the default) reads everything.
NpyArray read_npy(const std::string& path, int64_t max_records = -1);

/// The records of `header` to read for `max_records` (-1: all): min(max_records, shape[0]), or all
/// for a 0-d array.
int64_t npy_records_to_read(const NpyHeader& header, int64_t max_records);
/// header.shape[0] cut to `records` (which npy_records_to_read gave).
void cut_npy_records(NpyHeader& header, int64_t records);

/// Parses a whole .npy image held in memory (an .npz member). DataError naming `name`.
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& name);

/// The bytes of a .npy file (version 1.0, C order) for `shape` and raw little-endian `data`;
/// for tests and tools. Throws lathe::Error when data does not match shape and dtype.
std::vector<uint8_t> npy_bytes(NpyDtype dtype, const std::vector<int64_t>& shape, const std::vector<uint8_t>& data);

}  // namespace lathe
