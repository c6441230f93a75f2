// The tests' own .npz writer: a zip archive written byte by byte (local headers, central directory,
// end record), each member stored or deflated with zlib, so the reader is checked against files it
// did not write itself, and malformed archives (a size claim the data cannot hold, a wrong CRC) can
// be made on purpose. The .npy bytes come from lathe::npy_bytes or are written by hand in the test.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lathe::test {

struct ZipMember {
  std::string name;  // e.g. "x_train.npy"
  std::vector<uint8_t> bytes;
  bool deflate = false;
  int64_t claimed_size = -1;  // >= 0: the uncompressed size written in the headers instead of the real one
  bool bad_crc = false;       // write a wrong CRC-32
  int64_t claimed_comp_size = -1;  // >= 0: the compressed size written in the headers instead of the real one
};

inline void put16(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
inline void put32(std::vector<uint8_t>& b, uint32_t v) {
  put16(b, v & 0xffff);
  put16(b, v >> 16);
}

/// Raw deflate (no zlib header), as zip members hold it.
inline std::vector<uint8_t> raw_deflate(const std::vector<uint8_t>& in) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::vector<uint8_t> out(deflateBound(&z, in.size()) + 16);
  z.next_in = const_cast<Bytef*>(in.data());
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END)
    throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::vector<uint8_t> zip_bytes(const std::vector<ZipMember>& members) {
  std::vector<uint8_t> file, central;
  for (const ZipMember& m : members) {
    const std::vector<uint8_t> data = m.deflate ? raw_deflate(m.bytes) : m.bytes;
    uint32_t crc = static_cast<uint32_t>(crc32(0L, m.bytes.data(), static_cast<uInt>(m.bytes.size())));
    if (m.bad_crc)
      crc ^= 0xdeadbeef;
    const uint32_t size = static_cast<uint32_t>(m.claimed_size >= 0 ? m.claimed_size : static_cast<int64_t>(m.bytes.size()));
    const uint32_t offset = static_cast<uint32_t>(file.size());
    auto common = [&](std::vector<uint8_t>& b) {
      put16(b, 20);                   // version needed
      put16(b, 0);                    // flags
      put16(b, m.deflate ? 8 : 0);    // method
      put16(b, 0);                    // time
      put16(b, 0x21);                 // date: 1980-01-01
      put32(b, crc);
      put32(b, static_cast<uint32_t>(m.claimed_comp_size >= 0 ? m.claimed_comp_size
                                                               : static_cast<int64_t>(data.size())));
      put32(b, size);
      put16(b, static_cast<uint32_t>(m.name.size()));
      put16(b, 0);  // extra
    };
    put32(file, 0x04034b50);
    common(file);
    file.insert(file.end(), m.name.begin(), m.name.end());
    file.insert(file.end(), data.begin(), data.end());
    put32(central, 0x02014b50);
    put16(central, 20);  // version made by
    common(central);
    put16(central, 0);  // comment
    put16(central, 0);  // disk
    put16(central, 0);  // internal attributes
    put32(central, 0);  // external attributes
    put32(central, offset);
    central.insert(central.end(), m.name.begin(), m.name.end());
  }
  const uint32_t cd_offset = static_cast<uint32_t>(file.size());
  file.insert(file.end(), central.begin(), central.end());
  put32(file, 0x06054b50);
  put16(file, 0);
  put16(file, 0);
  put16(file, static_cast<uint32_t>(members.size()));
  put16(file, static_cast<uint32_t>(members.size()));
  put32(file, static_cast<uint32_t>(central.size()));
  put32(file, cd_offset);
  put16(file, 0);
  return file;
}

inline void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

/// Little-endian bytes of a vector of T.
template <typename T>
std::vector<uint8_t> le_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace lathe::test
