// IDX reader: the file format of MNIST and Fashion-MNIST (and any other IDX array of unsigned bytes).
// Reads plain or gzip-compressed files (detected by the 1f 8b magic) and rejects malformed ones with a
// lathe::DataError that names the file and says what is wrong, so a bad download is easy to spot.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

/// IDX magic numbers of the two files a labelled image set is made of (unsigned-byte element type).
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // u8, 1-D: [count]
inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // u8, 3-D: [count, rows, cols]

/// An IDX array of unsigned bytes: dims (outermost first) and data in row-major order. dims[0] is
/// the number of records read; header_records is the count the file's header declares (the same
/// unless read_idx was asked for only the first records).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
  int64_t header_records = 0;
};

/// Reads an IDX file of unsigned bytes. `expected_ndim` = 0 accepts any rank; otherwise a file of
/// another rank is rejected as a wrong magic number (e.g. 3 for images, 1 for labels).
/// `max_records` >= 0 reads only the first min(max_records, count) records (images, labels) and
/// stops there: the header and, for a plain file, its exact size are still checked, but a gzip
/// stream is only decompressed (and so checked for truncation, corruption and trailing bytes) as
/// far as those records go. 0 reads just the header; -1 (the default) reads and checks everything.
/// Throws lathe::DataError (naming `path`) for a missing or unreadable file, a wrong magic number,
/// an element type other than unsigned byte, a truncated file, trailing bytes, or a corrupt gzip stream.
IdxArray read_idx(const std::string& path, int expected_ndim = 0, int64_t max_records = -1);

/// Writes an IDX file of unsigned bytes (plain, or gzip when `gzip`); for tests and tools.
/// Throws lathe::DataError when the file cannot be written or `data` does not match `dims`.
void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data,
               bool gzip = false);

}  // namespace lathe
