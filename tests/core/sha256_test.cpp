// SHA-256 against the FIPS 180-2 example digests, across chunk boundaries, and on a file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/core/sha256.h"

namespace lathe {
namespace {

std::string digest(const std::string& s) {
  Sha256 h;
  h.update(s);
  return h.hex_digest();
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ChunkingDoesNotMatter) {
  std::string text;
  for (int i = 0; i < 1000; ++i)
    text += static_cast<char>('a' + (i * 7) % 26);
  const std::string whole = digest(text);
  for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 127u}) {
    Sha256 h;
    for (size_t i = 0; i < text.size(); i += chunk)
      h.update(std::string_view(text).substr(i, chunk));
    EXPECT_EQ(h.hex_digest(), whole) << chunk;
  }
}

TEST(Sha256, FileDigestAndSize) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("lathe_sha256_" + std::to_string(::getpid()) + ".bin");
  std::ofstream(path, std::ios::binary) << "abc";
  int64_t bytes = 0;
  EXPECT_EQ(sha256_file(path.string(), &bytes), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(bytes, 3);
  std::filesystem::remove(path);
  EXPECT_THROW(sha256_file(path.string()), DataError);
}

}  // namespace
}  // namespace lathe
