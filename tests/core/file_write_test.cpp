// Checked file writes (issue 11, item 4): a full disk (/dev/full: ENOSPC on every write) and a file
// size limit (RLIMIT_FSIZE in a forked child with SIGXFSZ ignored: EFBIG after N bytes) fail with
// the file named; atomic writes leave the old file and no temporary behind.
#include "engine/core/file_write.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/core/error.h"
#include "tests/support/file_size_limit.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class FileWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("lathe_file_write_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  std::string file(const std::string& name) const { return (m_dir / name).string(); }
  fs::path m_dir;
};

TEST_F(FileWrite, FullDiskNamesTheFile) {
  FileWriter w("/dev/full");
  w.write("run,metric,step\n");  // buffered: the disk is met at flush/close
  try {
    w.close();
    FAIL() << "a write to /dev/full must fail";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "writing /dev/full: No space left on device");
  }
}

TEST_F(FileWrite, LargeWritesGoStraightThroughAndFailToo) {
  FileWriter w("/dev/full");
  EXPECT_THROW(w.write(std::string(200 * 1024, 'x')), Error);  // larger than the buffer
}

TEST_F(FileWrite, WritesEverythingWhenThereIsRoom) {
  const std::string path = file("out.csv");
  {
    FileWriter w(path);
    for (int i = 0; i < 20000; ++i)
      w.write("line " + std::to_string(i) + "\n");
    w.close();
  }
  const std::string text = read_all(path);
  EXPECT_EQ(text.substr(0, 7), "line 0\n");
  EXPECT_EQ(text.substr(text.size() - 11), "line 19999\n");
  FileWriter a(path, FileWriter::Mode::append);
  a.write("more\n");
  a.close();
  EXPECT_EQ(read_all(path).size(), text.size() + 5);
}

TEST_F(FileWrite, FileSizeLimitIsAnErrorNotAShortWrite) {
  const std::string path = file("big.csv");
  const std::string got = test::in_child_with_file_limit(1000, [&] {
                            FileWriter w(path);
                            w.write(std::string(5000, 'x'));
                            w.close();
                            return std::string("ok");
                          }).out;
  EXPECT_EQ(got, "threw: writing " + path + ": File too large");
}

TEST_F(FileWrite, AtomicWriteKeepsTheOldFileAndNoTemporary) {
  const std::string path = file("config.json");
  write_file_atomic(path, "{\"old\": true}\n");
  EXPECT_EQ(read_all(path), "{\"old\": true}\n");
  const std::string got = test::in_child_with_file_limit(100, [&] {
                            write_file_atomic(path, std::string(1000, ' '));
                            return std::string("ok");
                          }).out;
  EXPECT_EQ(got, "threw: writing " + path + ": File too large");  // the real file named, not the temporary
  EXPECT_EQ(read_all(path), "{\"old\": true}\n");
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(m_dir))
    ++files;
  EXPECT_EQ(files, 1);  // no config.json.tmpNNN left
}

TEST_F(FileWrite, UnwritablePathIsReportedAtOpen) {
  try {
    FileWriter w(file("no/such/folder/x"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/folder/x: No such file or directory"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
