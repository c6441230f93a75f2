// Temporary output files that a Ctrl-C (SIGINT), SIGTERM or SIGHUP must not leave behind. A
// command writing a report or an export to "<folder>/.<name>.tmp-<pid>" before renaming it over
// the real file registers the temporary file here; install_temp_file_cleanup() makes those signals
// remove every registered file (async-signal-safe unlink), then end the process as the signal
// would have (default action, re-raised), so the exit status still says "killed by SIGINT".
#pragma once

#include <string>

namespace lathe {

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (for commands that have no handler of their
/// own: a training run checkpoints on those signals instead).
void install_temp_file_cleanup();

/// Registers `path` for removal on those signals while the object lives. Paths beyond the table's
/// capacity (16) or longer than 4095 bytes are not registered (then only the normal path removes them).
class TempFileGuard {
 public:
  explicit TempFileGuard(const std::string& path);
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;

 private:
  int m_slot = -1;
};

}  // namespace lathe
