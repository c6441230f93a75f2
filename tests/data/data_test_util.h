// Helpers for the data tests: a temporary folder per test, raw IDX byte builders (so malformed files
// can be written byte by byte), and a check that a call throws DataError mentioning given words.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/image_decode.h"

namespace lathe::test {

/// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "lathe_data_" + std::to_string(::getpid()) + "_";
    if (info)
      name += std::string(info->test_suite_name()) + "_" + info->name();
    m_path = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  std::string path() const { return m_path.string(); }

 private:
  std::filesystem::path m_path;
};

/// The bytes of an IDX file written by hand: magic (0, 0, type, ndim), big-endian dims, then data.
inline std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data,
                                      uint8_t type = 0x08) {
  std::vector<uint8_t> b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    b.push_back(static_cast<uint8_t>(d >> 24));
    b.push_back(static_cast<uint8_t>(d >> 16));
    b.push_back(static_cast<uint8_t>(d >> 8));
    b.push_back(static_cast<uint8_t>(d));
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    if (!bytes.empty())
      ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    ASSERT_EQ(std::fclose(f), 0);
  }
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::vector<uint8_t> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    return out;
  for (int c; (c = std::fgetc(f)) != EOF;)
    out.push_back(static_cast<uint8_t>(c));
  std::fclose(f);
  return out;
}

/// Runs `fn`, expects a lathe::DataError whose message contains every one of `words`.
inline void expect_data_error(const std::function<void()>& fn, const std::vector<std::string>& words) {
  try {
    fn();
    ADD_FAILURE() << "expected a DataError mentioning '" << (words.empty() ? "" : words[0]) << "'";
  } catch (const DataError& e) {
    const std::string msg = e.what();
    for (const std::string& w : words)
      EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a DataError, got another exception: " << e.what();
  }
}

/// Runs `fn` in a forked child and returns how far it raised the child's peak resident memory
/// (KiB), so a test can bound what a reader allocates; -1 when the child did not end normally.
inline long peak_rss_growth_kib(const std::function<void()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0)
    return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    try {
      fn();
    } catch (...) {
    }
    ::getrusage(RUSAGE_SELF, &after);
    const long growth = after.ru_maxrss - before.ru_maxrss;
    const bool ok = ::write(fds[1], &growth, sizeof growth) == static_cast<ssize_t>(sizeof growth);
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  long growth = -1;
  if (pid < 0 || ::read(fds[0], &growth, sizeof growth) != static_cast<ssize_t>(sizeof growth))
    growth = -1;
  ::close(fds[0]);
  int status = 0;
  if (pid > 0)
    ::waitpid(pid, &status, 0);
  return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? growth : -1;
}

/// n bytes of a fixed pattern that repeats only every 256 (a byte's position is visible in its value).
inline std::vector<uint8_t> ramp(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  return v;
}

/// An h x w image of c channels whose pixels follow a fixed pattern that differs with `seed`.
inline DecodedImage pattern_image(int64_t h, int64_t w, int64_t c, int seed) {
  DecodedImage img{w, h, c, {}};
  for (int64_t i = 0; i < h * w * c; ++i)
    img.pixels.push_back(static_cast<uint8_t>((i * 29 + seed * 71 + 3) % 256));
  return img;
}

}  // namespace lathe::test
