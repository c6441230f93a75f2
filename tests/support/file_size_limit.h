// Simulating a full disk in a test: a forked child limited to N bytes per file (RLIMIT_FSIZE, with
// SIGXFSZ ignored, so a write past the limit fails with EFBIG instead of killing the process).
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <exception>
#include <functional>
#include <string>

namespace lathe::test {

struct ChildResult {
  std::string out;      ///< what the body returned ("threw: ..." when it threw)
  bool exited = false;  ///< the child ended normally (was not killed by a signal)
};

/// Runs `body` in a child whose files may not grow past `limit` bytes, and hands back what it
/// returned through a pipe.
inline ChildResult in_child_with_file_limit(rlim_t limit, const std::function<std::string()>& body) {
  ChildResult r;
  int fds[2];
  if (::pipe(fds) != 0) {
    r.out = "pipe failed";
    return r;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    std::string out;
    try {
      out = body();
    } catch (const std::exception& e) {
      out = std::string("threw: ") + e.what();
    }
    [[maybe_unused]] const ssize_t n = ::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0)
    r.out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  r.exited = ::waitpid(pid, &status, 0) == pid && WIFEXITED(status);
  return r;
}

}  // namespace lathe::test
