// NpzArchive over libzip: member lookup, size checks and reading into memory.
#include "engine/data/npz_reader.h"

#include <zip.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "engine/core/error.h"

namespace lathe {
namespace {

/// Deflate's best ratio is a little over 1032:1; a member claiming more is refused before any allocation.
constexpr uint64_t kMaxDeflateRatio = 1040;

zip_t* as_zip(void* z) { return static_cast<zip_t*>(z); }

}  // namespace

NpzArchive::NpzArchive(const std::string& path) : m_path(path) {
  int error = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &error);
  if (!z) {
    zip_error_t e;
    zip_error_init_with_code(&e, error);
    const std::string what = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw DataError("NumPy archive '" + path + "': cannot open: " + what);
  }
  m_zip = z;
  std::error_code ec;
  m_file_bytes = std::filesystem::file_size(path, ec);
  if (ec) {
    zip_discard(z);
    m_zip = nullptr;
    throw DataError("NumPy archive '" + path + "': cannot tell its size: " + ec.message());
  }
}

NpzArchive::~NpzArchive() {
  if (m_zip)
    zip_discard(as_zip(m_zip));  // read-only: nothing to write back
}

std::vector<std::string> NpzArchive::names() const {
  std::vector<std::string> out;
  const zip_int64_t n = zip_get_num_entries(as_zip(m_zip), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    const char* name = zip_get_name(as_zip(m_zip), static_cast<zip_uint64_t>(i), 0);
    if (!name)
      continue;
    std::string s = name;
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".npy") == 0)
      s.resize(s.size() - 4);
    out.push_back(s);
  }
  return out;
}

bool NpzArchive::contains(const std::string& key) const {
  return zip_name_locate(as_zip(m_zip), (key + ".npy").c_str(), 0) >= 0;
}

NpyArray NpzArchive::read(const std::string& key, int64_t max_records) const {
  const std::string member = key + ".npy";
  const std::string where = m_path + ":" + member;
  const zip_int64_t index = zip_name_locate(as_zip(m_zip), member.c_str(), 0);
  if (index < 0) {
    std::string list;
    for (const std::string& n : names())
      list += (list.empty() ? "" : ", ") + n;
    throw DataError("NumPy archive '" + m_path + "' has no array '" + key + "' (member " + member +
                    "); it holds: " + (list.empty() ? "nothing" : list));
  }
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(as_zip(m_zip), static_cast<zip_uint64_t>(index), 0, &st) != 0 ||
      !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD))
    throw DataError("NumPy archive member '" + where + "': cannot read its directory entry");
  if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE)
    throw DataError("NumPy archive member '" + where + "': compression method " + std::to_string(st.comp_method) +
                    " is not supported; allowed: stored (np.savez) or deflate (np.savez_compressed)");
  // A claimed compressed size larger than the archive (fuzz_npz: a stored member claiming 2 GiB in a
  // 150-byte file was allocated in full) is refused, which also keeps the deflate bound from overflowing.
  if (st.comp_size > m_file_bytes)
    throw DataError("NumPy archive member '" + where + "' claims " + std::to_string(st.comp_size) +
                    " compressed bytes but the archive holds only " + std::to_string(m_file_bytes) +
                    " (corrupt or truncated archive)");
  const uint64_t limit = st.comp_method == ZIP_CM_STORE ? st.comp_size : st.comp_size * kMaxDeflateRatio + 64;
  if (st.size > limit)
    throw DataError("NumPy archive member '" + where + "' claims " + std::to_string(st.size) + " bytes, more than its " +
                    std::to_string(st.comp_size) + " " + (st.comp_method == ZIP_CM_STORE ? "stored" : "compressed") +
                    " bytes can hold (corrupt archive)");
  zip_file_t* f = zip_fopen_index(as_zip(m_zip), static_cast<zip_uint64_t>(index), 0);
  if (!f)
    throw DataError("NumPy archive member '" + where + "': cannot open: " + zip_strerror(as_zip(m_zip)));
  std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> guard(f, &zip_fclose);
  // The member is read as a stream: the header first, then only the records asked for.
  size_t at = 0;  // bytes of the member read so far
  auto read_exact = [&](uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const zip_int64_t r = zip_fread(f, dst + got, n - got);
      if (r < 0)
        throw DataError("NumPy archive member '" + where + "': " + zip_file_strerror(f));
      if (r == 0)
        break;
      got += static_cast<size_t>(r);
    }
    at += got;
    if (got != n)
      throw DataError("NumPy archive member '" + where + "': " + std::to_string(at) + " of " + std::to_string(st.size) +
                      " bytes could be read (truncated)");
  };
  const size_t total = static_cast<size_t>(st.size);
  // The preamble: 10 bytes (version 1), 12 (versions 2 and 3); none of the data is read with it.
  std::vector<uint8_t> header(kNpyPreambleBytes);
  read_exact(header.data(), std::min<size_t>(total, 10));
  if (at == 10 && (header[6] == 2 || header[6] == 3) && total >= kNpyPreambleBytes)
    read_exact(header.data() + at, kNpyPreambleBytes - at);
  const size_t header_size = npy_header_size(header.data(), at, total, where);
  header.resize(header_size);  // >= the preamble read
  read_exact(header.data() + at, header_size - at);
  NpyArray a;
  a.header = parse_npy_header(header.data(), header_size, total, where);  // sizes checked: now allocate
  a.file_records = a.header.shape.empty() ? 1 : a.header.shape[0];
  const int64_t records = npy_records_to_read(a.header, max_records);
  const bool whole = records == a.file_records;
  cut_npy_records(a.header, records);
  a.data.resize(a.header.data_bytes());
  read_exact(a.data.data(), a.data.size());
  // Reading past the end makes libzip check the CRC; a member read in part is not checked (its tail,
  // like a corrupt one, goes unnoticed: the subset's bytes are what the run uses).
  uint8_t extra = 0;
  if (whole && zip_fread(f, &extra, 1) < 0)
    throw DataError("NumPy archive member '" + where + "': " + zip_file_strerror(f));
  return a;
}

}  // namespace lathe
