// engine/core/temp_files.h: a registered temporary file is removed when SIGINT or SIGTERM ends the
// process, which still ends by that signal; an unregistered one, or one whose guard has gone, stays.
#include "engine/core/temp_files.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace lathe {
namespace {

namespace fs = std::filesystem;

/// In a child process: creates `registered` (guarded) and `plain` (not), drops the guard of
/// `released` after creating it, then raises `sig`. Returns the child's wait status.
int raise_in_child(int sig, const fs::path& registered, const fs::path& plain, const fs::path& released) {
  const pid_t pid = fork();
  if (pid == 0) {
    install_temp_file_cleanup();
    std::ofstream(registered) << "half a report";
    std::ofstream(plain) << "not ours";
    const TempFileGuard guard(registered.string());
    {
      std::ofstream(released) << "renamed into place already";
      const TempFileGuard gone(released.string());
    }
    ::raise(sig);
    _exit(0);  // not reached: the signal ends the process
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(TempFiles, ASignalRemovesRegisteredFilesAndStillEndsTheProcess) {
  const fs::path dir = fs::temp_directory_path() / ("lathe-temp-files-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (int sig : {SIGINT, SIGTERM}) {
    const fs::path tmp = dir / ".report.html.tmp-1", plain = dir / "plain.txt", released = dir / "released";
    const int status = raise_in_child(sig, tmp, plain, released);
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(WTERMSIG(status), sig);  // the shell still sees 130 / 143
    EXPECT_FALSE(fs::exists(tmp)) << sig;
    EXPECT_TRUE(fs::exists(plain)) << sig;
    EXPECT_TRUE(fs::exists(released)) << sig;
    fs::remove(plain);
    fs::remove(released);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lathe
