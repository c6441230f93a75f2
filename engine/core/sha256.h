// SHA-256 (FIPS 180-4) for artifact checksums: small and dependency-free, so recording a
// checkpoint's digest does not pull a crypto library into the engine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lathe {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  /// The digest as 64 lowercase hex digits. The object is spent afterwards.
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> m_h;
  std::array<uint8_t, 64> m_buf{};
  size_t m_buf_len = 0;
  uint64_t m_total = 0;
};

/// Digest of a file's bytes, read in chunks; sets `bytes` to its size. DataError when unreadable.
std::string sha256_file(const std::string& path, int64_t* bytes = nullptr);

}  // namespace lathe
