// Running the real lathe-cli from the e2e tests: the command's exit code and output, and a
// fixture with its own temporary folder, store and run folder per test.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace lathe::test {

struct CmdResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

/// Runs a shell command line and collects its output; `code` is the exit status, -1 on a signal.
inline CmdResult run_shell(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p)
    return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
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
