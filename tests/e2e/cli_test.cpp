// lathe-cli as a user runs it: exit code 2 with a clear message for a bad config or a bad dataset
// file, nothing written in either case; --json ends with the finished event.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/data/dataset.h"

namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

CmdResult run_cmd(const std::string& args) {
  const std::string cmd = std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli " + args + " 2>&1";
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("lathe-cli-test-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = m_dir / name;
    std::ofstream(p) << text;
    return p.string();
  }
  bool runs_written() const { return fs::exists(m_dir / "runs") && !fs::is_empty(m_dir / "runs"); }
  std::string out_dir() const { return "--set output.dir=" + (m_dir / "runs").string(); }
  fs::path m_dir;
};

TEST_F(Cli, UnknownKeyIsRejectedWithItsPathAndExitCode2) {
  const std::string cfg = write("bad.json", R"({"train": {"epochs": 1, "learning_rate": 0.1}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.learning_rate"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
}

TEST_F(Cli, OutOfRangeValueNamesTheAllowedRange) {
  const std::string cfg = write("bad.json", R"({"train": {"batch_size": 0}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.batch_size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
}

TEST_F(Cli, BadOverrideTypeIsRejected) {
  const std::string cfg = write("ok.json", R"({"model": {"zoo": "mlp"}})");
  const CmdResult r = run_cmd("run " + cfg + " --set train.epochs=lots " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.epochs"), std::string::npos) << r.out;
}

TEST_F(Cli, MissingConfigFileIsExitCode2) {
  const CmdResult r = run_cmd("run " + (m_dir / "nope.json").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("nope.json"), std::string::npos) << r.out;
}

TEST_F(Cli, TruncatedDatasetFileIsRejectedAndNothingIsWritten) {
  // An IDX image file whose header promises more bytes than it holds.
  std::ofstream img(m_dir / "imgs.idx", std::ios::binary);
  const unsigned char header[] = {0, 0, 8, 3, 0, 0, 0, 100, 0, 0, 0, 28, 0, 0, 0, 28};
  img.write(reinterpret_cast<const char*>(header), sizeof(header));
  img.write("\0\0\0\0", 4);
  img.close();
  std::ofstream lab(m_dir / "labels.idx", std::ios::binary);
  const unsigned char lheader[] = {0, 0, 8, 1, 0, 0, 0, 100};
  lab.write(reinterpret_cast<const char*>(lheader), sizeof(lheader));
  for (int i = 0; i < 100; ++i) lab.put(static_cast<char>(i % 10));
  lab.close();
  const std::string img_path = (m_dir / "imgs.idx").string(), lab_path = (m_dir / "labels.idx").string();
  const std::string cfg = write("idx.json", R"({"data": {"dataset": "idx", "train_images": ")" + img_path +
                                                R"(", "train_labels": ")" + lab_path + R"(", "test_images": ")" +
                                                img_path + R"(", "test_labels": ")" + lab_path + R"("}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("imgs.idx"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
}

TEST_F(Cli, JsonModePrintsOneObjectPerLineEndingWithFinished) {
  if (!fs::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 512, "test_subset": 500}})");
  const std::string cmd = std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli run " + cfg + " --json " + out_dir();
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  ASSERT_EQ(WEXITSTATUS(pclose(p)), 0) << out;
  std::istringstream lines(out);
  std::string line, last;
  while (std::getline(lines, line)) {
    ASSERT_TRUE(nlohmann::json::accept(line)) << line;
    last = line;
  }
  const auto fin = nlohmann::json::parse(last);
  EXPECT_EQ(fin["event"], "finished");
  EXPECT_GT(fin["metrics"]["test/accuracy"].get<double>(), 0.5);
  EXPECT_TRUE(runs_written());
}

}  // namespace
