// Store::open on bytes that are not a healthy store (issue 11): a corrupt or truncated database is
// refused with a DataError naming the file, never a crash or a raw SQLite error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/store/store.h"
#include "tests/store/store_test_util.h"

namespace lathe {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A healthy store with one run, checkpointed into the main file (no -wal left).
std::string healthy_store_bytes(const test::StoreDir& dir) {
  const std::string path = dir.file("healthy.db");
  {
    Store s = Store::open(path);
    RunInfo info;
    info.id = "r1";
    info.name = "one";
    s.create_run(info);
    s.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  return read_all(path);
}

TEST(StoreOpenBytes, CorruptSchemaPageIsADataErrorNamingTheFile) {
  test::StoreDir dir;
  std::string bytes = healthy_store_bytes(dir);
  ASSERT_GT(bytes.size(), 4096u);
  // Keep the 100-byte file header, scribble over the rest of page 1 (the schema table).
  for (size_t i = 100; i < 4096; ++i)
    bytes[i] = static_cast<char>(0xA5 ^ (i * 7));
  const std::string path = dir.file("corrupt.db");
  write_all(path, bytes);
  for (bool read_only : {false, true}) {
    Store::OpenOptions options;
    options.read_only = read_only;
    try {
      Store::open(path, options);
      ADD_FAILURE() << "a corrupt store opened (read_only " << read_only << ")";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
    }
  }
}

TEST(StoreOpenBytes, GarbageIsNotAStore) {
  test::StoreDir dir;
  const std::string path = dir.file("garbage.db");
  write_all(path, std::string(3000, 'x'));
  EXPECT_THROW(Store::open(path), DataError);
}

}  // namespace
}  // namespace lathe
