// Host, pid and liveness via POSIX and /proc.
#include "engine/store/process_info.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>

namespace lathe::store_detail {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0)
    return "unknown-host";
  return buf;
}

int64_t current_pid() { return static_cast<int64_t>(::getpid()); }

bool process_alive(int64_t pid) {
  if (pid <= 0)
    return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM)
    return false;
  // A killed child that nobody reaped yet still answers kill(): look at its state.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line))
    return true;  // no /proc: trust kill()
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size())
    return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

int64_t unix_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace lathe::store_detail
