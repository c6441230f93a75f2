// TeacherCache files crafted by hand (issue 11): a record count whose product with the record size
// wraps, or that is far larger than the file, is ignored with a note (the cache is rebuilt), never
// read past its buffer (SIGSEGV) nor allocated (std::bad_alloc); a valid file still loads. The image
// hash is XXH64 (the specification's test vectors, and a batch row hashes as its bytes); a file of the
// FNV-1a era ("LTCACHE1") is ignored and rebuilt.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "engine/compress/distill/teacher_cache.h"

namespace lathe {
namespace {

const std::vector<int64_t> kSizes = {10, 6};  // 16 floats: 72 bytes a record with its hash

/// A cache file as TeacherCache::save lays it out, claiming `count` records but holding `held`.
std::string crafted(uint64_t count, uint64_t held, const std::string& magic = "LTCACHE2") {
  std::string b = magic;
  auto put = [&](const auto& v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
  const std::string key = "k";
  put(uint64_t{key.size()});
  b += key;
  put(uint64_t{kSizes.size()});
  for (int64_t s : kSizes)
    put(s);
  put(0.5);
  put(int64_t{3});
  put(count);
  for (uint64_t r = 0; r < held; ++r) {
    put(uint64_t{r + 100});
    for (int i = 0; i < 16; ++i)
      put(static_cast<float>(i));
  }
  return b;
}

class TeacherCacheFile : public ::testing::Test {
 protected:
  void write(const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  void TearDown() override { std::remove(path.c_str()); }
  const std::string path = testing::TempDir() + "/lathe-teacher-cache-" + std::to_string(::getpid()) + ".bin";
};

TEST_F(TeacherCacheFile, ValidCraftedFileLoads) {
  write(crafted(2, 2));
  TeacherCache cache("k", kSizes);
  ASSERT_TRUE(cache.load(path)) << cache.load_note();
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.load_note(), "");
  EXPECT_DOUBLE_EQ(cache.test_accuracy, 0.5);
}

TEST_F(TeacherCacheFile, CountThatWrapsIsIgnoredNotReadPast) {
  // 2^62 records x 16 floats = 2^66 values: wraps to 0 in 64 bits, so a 0-float buffer was read into.
  write(crafted(uint64_t{1} << 62, 1));
  TeacherCache cache("k", kSizes);
  EXPECT_FALSE(cache.load(path));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_NE(cache.load_note().find(path), std::string::npos) << cache.load_note();
  EXPECT_NE(cache.load_note().find("claims 4611686018427387904 records of 72 bytes but 72 bytes follow"),
            std::string::npos)
      << cache.load_note();
  EXPECT_NE(cache.load_note().find("rebuilt"), std::string::npos) << cache.load_note();
}

TEST_F(TeacherCacheFile, HugeCountIsIgnoredWithoutAllocating) {
  // 2^40 records would be 64 TiB of floats: std::bad_alloc before the fix.
  write(crafted(uint64_t{1} << 40, 3));
  TeacherCache cache("k", kSizes);
  EXPECT_FALSE(cache.load(path));
  EXPECT_NE(cache.load_note().find("claims 1099511627776 records"), std::string::npos) << cache.load_note();
  // A count one larger or smaller than the records really held is refused too (truncated / trailing).
  write(crafted(4, 3));
  EXPECT_FALSE(cache.load(path));
  write(crafted(2, 3));
  EXPECT_FALSE(cache.load(path));
}

TEST_F(TeacherCacheFile, IgnoredFileIsRebuilt) {
  write(crafted(uint64_t{1} << 62, 0));
  TeacherCache cache("k", kSizes);
  ASSERT_FALSE(cache.load(path));
  Tensor logits = Tensor::zeros({1, 10}, DType::f32), taps = Tensor::zeros({1, 6}, DType::f32);
  cache.insert({7}, {&logits, &taps});
  cache.save(path);
  TeacherCache again("k", kSizes);
  ASSERT_TRUE(again.load(path)) << again.load_note();
  EXPECT_EQ(again.size(), 1u);
}

TEST_F(TeacherCacheFile, ASaveThatCannotBeWrittenIsAnErrorNamingTheFile) {
  TeacherCache cache("k", kSizes);
  Tensor logits = Tensor::zeros({1, 10}, DType::f32), taps = Tensor::zeros({1, 6}, DType::f32);
  cache.insert({7}, {&logits, &taps});
  const std::string bad = path + ".missing-folder/cache.bin";
  try {
    cache.save(bad);
    ADD_FAILURE() << "saved into a folder that does not exist";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cache.bin"), std::string::npos) << e.what();
  }
}

TEST_F(TeacherCacheFile, MissingFileHasNoNote) {
  TeacherCache cache("k", kSizes);
  EXPECT_FALSE(cache.load(path + ".none"));
  EXPECT_EQ(cache.load_note(), "");
}

TEST_F(TeacherCacheFile, AFileOfTheFnvHashEraIsIgnoredWithANote) {
  write(crafted(2, 2, "LTCACHE1"));
  TeacherCache cache("k", kSizes);
  EXPECT_FALSE(cache.load(path));
  EXPECT_NE(cache.load_note().find("FNV-1a"), std::string::npos) << cache.load_note();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(TeacherCacheHash, Xxh64MatchesPublishedVectors) {
  // xxHash's own values (XXH64, seed 0): the empty input, a short one (the < 32-byte path) and a
  // 39-byte one (stripes, an 8-byte word, a 4-byte word and single bytes); then a seed.
  const auto h = [](const std::string& s, uint64_t seed = 0) {
    return TeacherCache::xxh64(reinterpret_cast<const unsigned char*>(s.data()), s.size(), seed);
  };
  EXPECT_EQ(h(""), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(h("abc"), 0x44BC2CF5AD770999ull);
  EXPECT_EQ(h("Nobody inspects the spammish repetition"), 0xFBCEA83C8A378BF1ull);
  EXPECT_NE(h("abc", 1), h("abc"));
}

TEST(TeacherCacheHash, AnImageRowHashesAsItsBytesAndOneBitChangesIt) {
  Tensor images = Tensor::zeros({3, 1, 28, 28}, DType::f32);
  for (int64_t i = 0; i < images.numel(); ++i)
    images.data<float>()[i] = static_cast<float>(i % 97) * 0.25f;
  const auto* bytes = static_cast<const unsigned char*>(images.raw());
  const size_t row = 28 * 28 * sizeof(float);
  for (int64_t r = 0; r < 3; ++r)
    EXPECT_EQ(TeacherCache::hash_image(images, r), TeacherCache::xxh64(bytes + r * row, row));
  const uint64_t before = TeacherCache::hash_image(images, 1);
  images.data<float>()[28 * 28 + 500] = -images.data<float>()[28 * 28 + 500];  // one sign bit
  EXPECT_NE(TeacherCache::hash_image(images, 1), before);
  images.data<float>()[28 * 28 + 500] = -images.data<float>()[28 * 28 + 500];
  EXPECT_EQ(TeacherCache::hash_image(images, 1), before);
}

}  // namespace
}  // namespace lathe
