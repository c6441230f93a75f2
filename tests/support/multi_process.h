// Multi-process tests: fork one child per rank, run a function in each (it reports a failure by
// throwing), and reap every child within a time limit (killing the late ones), so that a test sees
// each rank's exit status, message and duration, and leaves no process behind.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace lathe::test {

struct ChildResult {
  int index = 0;
  bool exited_ok = false;  // exit status 0
  bool killed = false;     // still running at the limit (SIGKILLed)
  std::string message;     // the exception's text of a failed child
  double seconds = 0;      // fork to exit, as the parent saw it
};

/// Throws std::runtime_error(what) when `ok` is false (children report failures by throwing).
inline void require(bool ok, const std::string& what) {
  if (!ok)
    throw std::runtime_error(what);
}

/// Runs fn(i) for i in [0, count) in `count` forked children; returns when all have exited or been
/// killed after `limit_s`. Every child is reaped.
inline std::vector<ChildResult> run_processes(int count, const std::function<void(int)>& fn, double limit_s) {
  struct Child {
    pid_t pid;
    int read_fd;
  };
  std::vector<Child> children;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    int fds[2];
    if (pipe(fds) != 0)
      throw std::runtime_error("pipe failed");
    const pid_t pid = fork();
    if (pid < 0)
      throw std::runtime_error("fork failed");
    if (pid == 0) {
      close(fds[0]);
      int code = 0;
      std::string msg;
      try {
        fn(i);
      } catch (const std::exception& e) {
        msg = e.what();
        code = 1;
      } catch (...) {
        msg = "unknown exception";
        code = 1;
      }
      if (!msg.empty())
        (void)!write(fds[1], msg.data(), msg.size());
      close(fds[1]);
      _exit(code);  // no atexit handlers or gtest teardown in a child
    }
    close(fds[1]);
    children.push_back({pid, fds[0]});
  }
  std::vector<ChildResult> results(count);
  std::vector<bool> done(count, false);
  int remaining = count;
  const auto limit = start + std::chrono::duration<double>(limit_s);
  while (remaining > 0) {
    for (int i = 0; i < count; ++i) {
      if (done[i])
        continue;
      int status = 0;
      const bool late = std::chrono::steady_clock::now() >= limit;
      if (late)
        kill(children[i].pid, SIGKILL);
      const pid_t r = waitpid(children[i].pid, &status, late ? 0 : WNOHANG);
      if (r != children[i].pid)
        continue;
      done[i] = true;
      --remaining;
      ChildResult& res = results[i];
      res.index = i;
      res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      res.killed = late && WIFSIGNALED(status);
      res.exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      char buf[4096];
      ssize_t n;
      while ((n = read(children[i].read_fd, buf, sizeof buf)) > 0)
        res.message.append(buf, n);
      close(children[i].read_fd);
    }
    if (remaining > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return results;
}

/// True when this process has no child left (every fork reaped).
inline bool no_children_left() {
  int status = 0;
  return waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

/// A fresh folder under the system temp folder (removed by the caller).
inline std::filesystem::path fresh_temp_folder(const std::string& tag) {
  std::string templ = (std::filesystem::temp_directory_path() / ("lathe-" + tag + "-XXXXXX")).string();
  if (!mkdtemp(templ.data()))
    throw std::runtime_error("mkdtemp failed");
  return templ;
}

}  // namespace lathe::test
