// NumPy .npz archives (a zip of .npy members, stored or deflated) read with libzip from Debian.
// A member's claimed compressed size is checked against the archive's size and its claimed size
// against what those compressed bytes can expand to before it is read, and its CRC is checked by libzip at the end;
// errors are lathe::DataErrors naming the archive and the member. A member may be read in part (its first records), for
// data subsets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/npy_reader.h"

namespace lathe {

class NpzArchive {
 public:
  /// Opens `path`; DataError naming it when it is missing or not a zip archive.
  explicit NpzArchive(const std::string& path);
  ~NpzArchive();
  NpzArchive(const NpzArchive&) = delete;
  NpzArchive& operator=(const NpzArchive&) = delete;

  /// The array names (members without their ".npy").
  std::vector<std::string> names() const;
  bool contains(const std::string& key) const;
  /// Reads array `key` (member key.npy). DataError naming the archive and the member for a missing
  /// member (the names there are listed), a compression method other than stored or deflate, a
  /// claimed size its compressed bytes cannot hold, a corrupt stream or CRC, or a bad .npy inside.
  /// `max_records` >= 0 reads only the first min(max_records, shape[0]) records: the stream stops
  /// there (a deflated member is inflated only that far) and the CRC, which needs the whole member,
  /// is not checked. -1 (the default) reads and checks everything.
  NpyArray read(const std::string& key, int64_t max_records = -1) const;
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
  uint64_t m_file_bytes = 0;  // the archive's size: no member's compressed bytes can claim more
  void* m_zip = nullptr;      // zip_t*, kept out of the header
};

}  // namespace lathe
