// IDX reader and writer. The header is a 4-byte magic (0, 0, element type, rank) followed by one
// big-endian u32 per dimension; the data follows, row-major. Files are streamed (plain stdio or zlib's
// gzread). The size the header claims is checked against the file before anything is allocated: a
// plain file must hold exactly that many bytes; a gzip file must be big enough to expand to it
// (deflate's ~1032:1 limit), and is read in 16 MiB chunks so the buffer grows only with real data.
// Asked for the first N records only, it reads (and for gzip, decompresses) only those bytes.
#include "engine/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "engine/core/error.h"

namespace lathe {
namespace {

constexpr uint8_t kTypeU8 = 0x08;
// The largest array we accept (16 GiB): a header promising more is corrupt, not a data set.
constexpr int64_t kMaxIdxBytes = int64_t{1} << 34;
// deflate expands at most ~1032:1, so a gzip file of C bytes cannot hold more than this many bytes
// per compressed byte (plus one block's worth of slack): a header promising more is corrupt.
constexpr int64_t kMaxGzipRatio = 1100;
// Gzip data is read in chunks of this size, so the buffer only grows as far as the data really goes.
constexpr size_t kGzipChunk = size_t{16} << 20;

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

std::string hex8(uint32_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v & 0xffu);
  return buf;
}

const char* type_name(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

std::string magic_meaning(int ndim) {
  if (ndim == 1)
    return " (labels, u8 1-D)";
  if (ndim == 3)
    return " (images, u8 3-D)";
  return " (u8 " + std::to_string(ndim) + "-D)";
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw DataError("IDX file '" + path + "': " + problem);
}

/// A byte stream over a plain or a gzip-compressed file.
class ByteSource {
 public:
  ByteSource(const std::string& path) : m_path(path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec))
      fail(path, "file not found");
    if (std::filesystem::is_directory(path, ec))
      fail(path, "is a directory, expected a file");
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f)
      fail(path, std::string("cannot open: ") + std::strerror(errno));
    unsigned char head[2] = {0, 0};
    const size_t got = std::fread(head, 1, 2, f);
    m_gzip = got == 2 && head[0] == 0x1f && head[1] == 0x8b;
    if (m_gzip) {
      std::fclose(f);
      m_gz = gzopen(path.c_str(), "rb");
      if (!m_gz)
        fail(path, std::string("cannot open gzip stream: ") + std::strerror(errno));
      gzbuffer(m_gz, 256 * 1024);
    } else {
      std::rewind(f);
      m_file = f;
    }
    m_file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
    if (ec)
      fail(path, "cannot read its size: " + ec.message());
  }
  ~ByteSource() {
    if (m_gz)
      gzclose(m_gz);
    if (m_file)
      std::fclose(m_file);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return m_gzip; }
  /// Size of the file on disk (compressed size for gzip).
  int64_t file_size() const { return m_file_size; }

  /// Reads up to `n` bytes; returns how many were read (fewer only at the end of the data).
  /// A corrupt gzip stream throws; a gzip stream cut short is remembered for the caller's message.
  size_t read(void* dst, size_t n) {
    size_t total = 0;
    char* out = static_cast<char*>(dst);
    while (total < n) {
      const size_t want = std::min<size_t>(n - total, size_t{1} << 30);
      size_t got = 0;
      if (m_gz) {
        const int r = gzread(m_gz, out + total, static_cast<unsigned>(want));
        if (r < 0)
          check_gz_error();
        got = r > 0 ? static_cast<size_t>(r) : 0;
        if (got < want)
          check_gz_error();
      } else {
        got = std::fread(out + total, 1, want, m_file);
        if (got < want && std::ferror(m_file))
          fail(m_path, std::string("read error: ") + std::strerror(errno));
      }
      total += got;
      if (got < want)
        break;
    }
    return total;
  }

  /// " (the gzip stream ends early: ...)" when the compressed data was cut short, else "".
  std::string truncation_note() const { return m_gz_truncated ? " (the gzip stream is cut short)" : ""; }

 private:
  std::string m_path;
  bool m_gzip = false;
  bool m_gz_truncated = false;
  int64_t m_file_size = 0;
  gzFile m_gz = nullptr;
  FILE* m_file = nullptr;

  void check_gz_error() {
    int errnum = Z_OK;
    const char* msg = gzerror(m_gz, &errnum);
    if (errnum == Z_BUF_ERROR) {
      m_gz_truncated = true;  // the compressed stream ended early: reported as a truncated file
    } else if (errnum != Z_OK && errnum != Z_STREAM_END) {
      fail(m_path, std::string("corrupt gzip data (zlib: ") + (msg ? msg : "unknown error") + ")");
    }
  }
};

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

IdxArray read_idx(const std::string& path, int expected_ndim, int64_t max_records) {
  ByteSource src(path);
  const std::string kind = src.gzip() ? "gzip-compressed " : "";

  unsigned char magic[4];
  const size_t got_magic = src.read(magic, 4);
  if (got_magic < 4)
    fail(path, "truncated: the " + kind + "file holds " + std::to_string(got_magic) +
                   " bytes, fewer than the 4-byte IDX magic number" + src.truncation_note());
  const uint32_t magic_value = be32(magic);
  const std::string expected_text =
      expected_ndim > 0 ? hex32((uint32_t{kTypeU8} << 8) | uint32_t(expected_ndim)) + magic_meaning(expected_ndim)
                        : hex32(kIdxLabelsMagic) + " (labels) or " + hex32(kIdxImagesMagic) + " (images)";
  if (magic[0] != 0 || magic[1] != 0)
    fail(path,
         "wrong magic number " + hex32(magic_value) + ", expected " + expected_text + ": this is not an IDX file");
  if (magic[2] != kTypeU8) {
    const char* name = type_name(magic[2]);
    fail(path, "wrong element type " + hex8(magic[2]) + (name ? std::string(" (") + name + ")" : " (unknown)") +
                   " in magic number " + hex32(magic_value) + "; only " + hex8(kTypeU8) +
                   " (unsigned byte) is supported");
  }
  const int ndim = magic[3];
  if (ndim == 0)
    fail(path, "wrong magic number " + hex32(magic_value) + " (rank 0), expected " + expected_text);
  if (expected_ndim > 0 && ndim != expected_ndim)
    fail(path, "wrong magic number " + hex32(magic_value) + magic_meaning(ndim) + ", expected " + expected_text);

  std::vector<unsigned char> header(4 * static_cast<size_t>(ndim));
  const size_t got_header = src.read(header.data(), header.size());
  if (got_header < header.size())
    fail(path, "truncated: the header promises " + std::to_string(ndim) + " dimensions (" +
                   std::to_string(header.size()) + " bytes) after the magic number, but only " +
                   std::to_string(got_header) + " bytes follow" + src.truncation_note());

  IdxArray out;
  out.dims.resize(ndim);
  int64_t total = 1;
  std::string dims_text;
  for (int i = 0; i < ndim; ++i) {
    out.dims[i] = be32(&header[4 * i]);
    dims_text += (i ? " x " : "") + std::to_string(out.dims[i]);
    if (out.dims[i] > 0 && total > kMaxIdxBytes / out.dims[i])
      fail(path, "the header promises an implausible size (" + dims_text + " ...), over 16 GiB: corrupt header");
    total *= out.dims[i];
  }

  // The claim is checked against what the file can hold before anything is allocated.
  auto truncated = [&](int64_t have) {
    fail(path, "truncated: the header promises " + std::to_string(total) + " bytes of data (" + dims_text +
                   ") but only " + std::to_string(have) + " bytes follow it" + src.truncation_note());
  };
  const int64_t header_bytes = 4 + 4 * static_cast<int64_t>(ndim);
  // Only the first `records` records are read when max_records asks for fewer than the file holds.
  out.header_records = out.dims[0];
  const bool partial = max_records >= 0 && max_records < out.dims[0];
  const int64_t records = partial ? max_records : out.dims[0];
  const int64_t wanted = out.dims[0] > 0 ? total / out.dims[0] * records : 0;
  out.dims[0] = records;
  if (!src.gzip()) {
    const int64_t rest = std::max<int64_t>(0, src.file_size() - header_bytes);
    if (total > rest)
      truncated(rest);
    if (total < rest)
      fail(path, std::to_string(rest - total) + " unexpected bytes after the " + std::to_string(total) +
                     " bytes of data the header promises (" + dims_text + ")");
    out.data.resize(static_cast<size_t>(wanted));
    const size_t got_data = src.read(out.data.data(), out.data.size());
    if (got_data < out.data.size())
      truncated(static_cast<int64_t>(got_data));
  } else {
    const int64_t most =
        src.file_size() > kMaxIdxBytes / kMaxGzipRatio ? kMaxIdxBytes : src.file_size() * kMaxGzipRatio + (1 << 16);
    if (total + header_bytes > most)
      fail(path, "the header promises " + std::to_string(total) + " bytes of data (" + dims_text + "), more than a " +
                     std::to_string(src.file_size()) + "-byte gzip file can hold: corrupt header or truncated file");
    size_t have = 0;
    while (have < static_cast<size_t>(wanted)) {
      const size_t want = std::min(kGzipChunk, static_cast<size_t>(wanted) - have);
      out.data.resize(have + want);
      const size_t got = src.read(out.data.data() + have, want);
      have += got;
      if (got < want)
        truncated(static_cast<int64_t>(have));
    }
  }

  if (partial)
    return out;  // the rest of the data is neither read nor, for gzip, decompressed
  unsigned char extra[4096];
  size_t trailing = 0;
  for (size_t n; (n = src.read(extra, sizeof extra)) > 0;)
    trailing += n;
  if (trailing > 0)
    fail(path, std::to_string(trailing) + " unexpected bytes after the " + std::to_string(total) +
                   " bytes of data the header promises (" + dims_text + ")");
  return out;
}

void write_idx(const std::string& path, const std::vector<int64_t>& dims, const std::vector<uint8_t>& data, bool gzip) {
  if (dims.empty() || dims.size() > 255)
    throw DataError("write_idx '" + path + "': rank must be 1..255");
  int64_t total = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > 0xffffffffll)
      throw DataError("write_idx '" + path + "': dimension out of range");
    total *= d;
  }
  if (total != static_cast<int64_t>(data.size()))
    throw DataError("write_idx '" + path + "': " + std::to_string(data.size()) + " bytes of data for dims of " +
                    std::to_string(total) + " elements");
  std::vector<unsigned char> bytes = {0, 0, kTypeU8, static_cast<unsigned char>(dims.size())};
  for (int64_t d : dims) {
    const auto v = static_cast<uint32_t>(d);
    for (int s = 24; s >= 0; s -= 8)
      bytes.push_back(static_cast<unsigned char>(v >> s));
  }
  bytes.insert(bytes.end(), data.begin(), data.end());

  bool ok = false;
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f) {
      ok = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size());
      ok = (gzclose(f) == Z_OK) && ok;
    }
  } else if (FILE* f = std::fopen(path.c_str(), "wb")) {
    ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = (std::fclose(f) == 0) && ok;
  }
  if (!ok)
    throw DataError("write_idx '" + path + "': cannot write: " + std::strerror(errno));
}

}  // namespace lathe
