// IDX reader: plain and gzip files written by the test byte by byte, and every kind of malformed
// file rejected with a DataError that names the file and the problem.
#include <gtest/gtest.h>

#include "engine/data/idx_reader.h"
#include "tests/data/data_test_util.h"

namespace lathe {
namespace {

using test::expect_data_error;
using test::idx_bytes;
using test::TempDir;
using test::write_bytes;

using test::ramp;

TEST(IdxReader, ReadsPlainImagesWithBigEndianDims) {
  TempDir dir;
  const std::string path = dir.file("images-idx3-ubyte");
  // 2 images of 3 x 260 pixels: 260 needs two bytes, so a little-endian reader would get it wrong.
  const auto data = ramp(2 * 3 * 260);
  write_bytes(path, idx_bytes({2, 3, 260}, data));
  const auto bytes = test::read_bytes(path);
  ASSERT_GE(bytes.size(), 16u);
  EXPECT_EQ(bytes[3], 3);
  EXPECT_EQ(bytes[14], 0x01);  // 260 = 0x0104, big-endian
  EXPECT_EQ(bytes[15], 0x04);

  IdxArray a = read_idx(path);
  EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 3, 260}));
  EXPECT_EQ(a.data, data);
  EXPECT_EQ(read_idx(path, 3).data, data);
}

TEST(IdxReader, ReadsGzipAndPlainLabelsAlike) {
  TempDir dir;
  const std::vector<uint8_t> labels = {9, 0, 0, 3, 0, 2, 7};
  write_bytes(dir.file("plain"), idx_bytes({7}, labels));
  write_bytes(dir.file("packed.gz"), idx_bytes({7}, labels), /*gzip=*/true);
  const auto packed = test::read_bytes(dir.file("packed.gz"));
  ASSERT_GE(packed.size(), 2u);
  EXPECT_EQ(packed[0], 0x1f);  // really compressed, so the gzip path is the one under test
  EXPECT_EQ(packed[1], 0x8b);

  for (const char* name : {"plain", "packed.gz"}) {
    IdxArray a = read_idx(dir.file(name), 1);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{7}));
    EXPECT_EQ(a.data, labels) << name;
  }
}

TEST(IdxReader, GzipDetectedByContentNotByName) {
  TempDir dir;
  const auto data = ramp(4 * 5 * 6);
  write_bytes(dir.file("no-suffix"), idx_bytes({4, 5, 6}, data), /*gzip=*/true);
  write_bytes(dir.file("lying.gz"), idx_bytes({4, 5, 6}, data), /*gzip=*/false);
  EXPECT_EQ(read_idx(dir.file("no-suffix")).data, data);
  EXPECT_EQ(read_idx(dir.file("lying.gz")).data, data);
}

TEST(IdxReader, WriteIdxRoundTrips) {
  TempDir dir;
  const auto data = ramp(3 * 2 * 2);
  write_idx(dir.file("w"), {3, 2, 2}, data);
  write_idx(dir.file("w.gz"), {3, 2, 2}, data, /*gzip=*/true);
  EXPECT_EQ(test::read_bytes(dir.file("w")), idx_bytes({3, 2, 2}, data));
  for (const char* name : {"w", "w.gz"}) {
    IdxArray a = read_idx(dir.file(name), 3);
    EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2, 2}));
    EXPECT_EQ(a.data, data);
  }
  expect_data_error([&] { write_idx(dir.file("bad"), {2, 2}, ramp(3)); }, {"bad", "3 bytes"});
}

TEST(IdxReader, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("nowhere-idx3-ubyte");
  expect_data_error([&] { read_idx(path); }, {path, "not found"});
  expect_data_error([&] { read_idx(dir.path()); }, {dir.path(), "directory"});
}

TEST(IdxReader, WrongMagicSaysFoundAndExpected) {
  TempDir dir;
  const std::string path = dir.file("zip-not-idx");
  write_bytes(path, {0x50, 0x4B, 0x03, 0x04, 0, 0, 0, 1, 7});
  expect_data_error([&] { read_idx(path); }, {path, "wrong magic number", "0x504B0304", "0x00000801", "0x00000803"});
}

TEST(IdxReader, LabelsFileWhereImagesExpected) {
  TempDir dir;
  const std::string path = dir.file("train-labels-idx1-ubyte");
  write_bytes(path, idx_bytes({3}, {1, 2, 3}));
  expect_data_error([&] { read_idx(path, 3); }, {path, "wrong magic number 0x00000801", "expected 0x00000803"});
  expect_data_error([&] { read_idx(path, 2); }, {path, "0x00000801", "expected 0x00000802"});
}

TEST(IdxReader, WrongElementType) {
  TempDir dir;
  const std::string path = dir.file("floats-idx3");
  write_bytes(path, idx_bytes({1, 1, 1}, {0, 0, 0, 0}, /*type=*/0x0D));
  expect_data_error([&] { read_idx(path, 3); }, {path, "element type 0x0D", "float32", "0x08", "unsigned byte"});
  const std::string odd = dir.file("odd-type");
  write_bytes(odd, idx_bytes({1}, {0}, /*type=*/0x42));
  expect_data_error([&] { read_idx(odd); }, {odd, "element type 0x42", "unknown"});
}

TEST(IdxReader, TruncatedData) {
  TempDir dir;
  const std::string path = dir.file("short-idx3");
  auto bytes = idx_bytes({2, 3, 3}, ramp(18));
  bytes.resize(bytes.size() - 8);  // 10 of the 18 data bytes left
  write_bytes(path, bytes);
  expect_data_error([&] { read_idx(path, 3); }, {path, "truncated", "18 bytes", "2 x 3 x 3", "only 10"});

  const std::string gz = dir.file("short-idx3.gz");
  write_bytes(gz, bytes, /*gzip=*/true);
  expect_data_error([&] { read_idx(gz, 3); }, {gz, "truncated", "18 bytes", "only 10"});
}

TEST(IdxReader, TruncatedHeader) {
  TempDir dir;
  const std::string path = dir.file("header-only");
  auto bytes = idx_bytes({60000, 28, 28}, {});
  bytes.resize(9);  // magic plus 5 of the 12 dimension bytes
  write_bytes(path, bytes);
  expect_data_error([&] { read_idx(path); }, {path, "truncated", "3 dimensions", "only 5"});

  const std::string empty = dir.file("empty");
  write_bytes(empty, {});
  expect_data_error([&] { read_idx(empty); }, {empty, "truncated", "0 bytes"});
}

TEST(IdxReader, GzipStreamCutShort) {
  TempDir dir;
  const std::string whole = dir.file("whole.gz");
  // Incompressible data, so cutting the compressed file in half cuts the payload too.
  std::vector<uint8_t> noise(4000);
  uint32_t x = 12345;
  for (auto& b : noise)
    b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  write_bytes(whole, idx_bytes({4000}, noise), /*gzip=*/true);
  auto packed = test::read_bytes(whole);
  packed.resize(packed.size() / 2);
  const std::string cut = dir.file("cut.gz");
  write_bytes(cut, packed);
  expect_data_error([&] { read_idx(cut); }, {cut, "truncated", "gzip stream is cut short"});
}

TEST(IdxReader, CorruptGzip) {
  TempDir dir;
  const std::string path = dir.file("corrupt.gz");
  // A valid gzip member header, then bytes that are not a deflate stream (block type 3 is reserved).
  write_bytes(path, {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  expect_data_error([&] { read_idx(path); }, {path, "gzip"});
}

TEST(IdxReader, TrailingBytes) {
  TempDir dir;
  const std::string path = dir.file("long-idx1");
  auto bytes = idx_bytes({3}, {1, 2, 3});
  bytes.push_back(4);
  bytes.push_back(5);
  write_bytes(path, bytes);
  expect_data_error([&] { read_idx(path); }, {path, "2 unexpected bytes", "3 bytes of data"});
}

TEST(IdxReader, ImplausibleHeader) {
  TempDir dir;
  const std::string path = dir.file("huge");
  write_bytes(path, idx_bytes({0xffffffffu, 0xffffffffu, 2}, {}));
  expect_data_error([&] { read_idx(path); }, {path, "implausible size"});
}

// Issue 11: a 16-byte file claiming 2.7M x 28 x 28 images (2.1 GB) is refused, naming the file,
// before anything of that size is allocated (the child's peak memory may grow by 64 MiB at most).
TEST(IdxReader, TinyFileClaimingHugeDataIsRefusedWithoutAllocating) {
  TempDir dir;
  const std::string path = dir.file("tiny-idx3");
  write_bytes(path, idx_bytes({2'700'000, 28, 28}, {}));
  ASSERT_EQ(test::read_bytes(path).size(), 16u);
  expect_data_error([&] { read_idx(path, 3); }, {path, "truncated", "2116800000 bytes", "only 0"});
  const long growth = test::peak_rss_growth_kib([&] { read_idx(path, 3); });
  ASSERT_GE(growth, 0);
  EXPECT_LT(growth, 64 * 1024) << "read_idx allocated about " << growth / 1024 << " MiB for a 16-byte file";

  // The same header gzip-compressed (a few dozen bytes cannot expand to 2.1 GB).
  const std::string gz = dir.file("tiny-idx3.gz");
  write_bytes(gz, idx_bytes({2'700'000, 28, 28}, std::vector<uint8_t>(100)), /*gzip=*/true);
  expect_data_error([&] { read_idx(gz, 3); }, {gz, "2116800000 bytes", "gzip file can hold"});
  const long gz_growth = test::peak_rss_growth_kib([&] { read_idx(gz, 3); });
  ASSERT_GE(gz_growth, 0);
  EXPECT_LT(gz_growth, 64 * 1024) << "read_idx allocated about " << gz_growth / 1024 << " MiB for a tiny gzip file";
}

// A large claim (1 GiB here; the cap is 16 GiB) in a plain file is refused by its size, not zero-filled first.
TEST(IdxReader, ClaimUnderTheCapIsCheckedAgainstTheFileSize) {
  TempDir dir;
  const std::string path = dir.file("big-claim");
  write_bytes(path, idx_bytes({1023, 1024, 1024}, ramp(1000)));
  expect_data_error([&] { read_idx(path); }, {path, "truncated", "only 1000"});
  const long growth = test::peak_rss_growth_kib([&] { read_idx(path); });
  ASSERT_GE(growth, 0);
  EXPECT_LT(growth, 64 * 1024);
}

}  // namespace
}  // namespace lathe
