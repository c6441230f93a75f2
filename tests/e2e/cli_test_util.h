// Running the real lathe-cli from the e2e tests: the command's exit code and output, and a
// fixture with its own temporary folder, store and run folder per test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/run_shell.h"

namespace lathe::test {

/// The path of the one entry in `dir` (the last listed where there are several; "" where empty).
inline std::string only_subfolder(const std::filesystem::path& dir) {
  std::string found;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    found = e.path().string();
  return found;
}

inline std::string cli_binary() { return std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli"; }

/// lathe-cli with `args` (a shell fragment).
inline CmdResult run_cmd(const std::string& args) { return run_shell(cli_binary() + " " + args); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() / ("lathe-cli-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }
  std::string write(const std::string& name, const std::string& text) {
    const std::filesystem::path p = m_dir / name;
    std::ofstream(p) << text;
    return p.string();
  }
  bool runs_written() const {
    return std::filesystem::exists(m_dir / "runs") && !std::filesystem::is_empty(m_dir / "runs");
  }
  std::string db() const { return (m_dir / "lathe.db").string(); }
  /// Where a test's runs go: its own run folder and store, never the user's.
  std::string out_dir() const { return "--db " + db() + " --set output.dir=" + (m_dir / "runs").string(); }
  bool store_written() const { return std::filesystem::exists(m_dir / "lathe.db"); }
  std::filesystem::path m_dir;
};

}  // namespace lathe::test
