// Running a shell command line from a test: its exit code and its output (stdout and stderr
// together). The e2e CLI tests and the report tests run the real lathe-cli through it.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace lathe::test {

struct CmdResult {
  int code = -1;    ///< the exit status, -1 when the command was killed by a signal
  std::string out;  ///< stdout and stderr together
};

/// Runs `cmd` through /bin/sh, capturing its output.
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

}  // namespace lathe::test
