// Stop signals off the compute threads. While a run trains, SIGINT, SIGTERM and SIGUSR1 (the stop
// and spot-notice signals lathe-cli handles) are blocked on the thread that trains and on every
// thread it starts (OpenMP's, the data loader's, the store writer's, the gradient communication
// thread), so a signal never interrupts their work; it is delivered to a thread that only waits
// for it (or to one started before, such as the rank watcher), where the installed handler sets
// the stop flags. A 2-rank run stopped by a signal that landed on its training thread could end
// with a corrupted heap (see docs/ARCHITECTURE.md, "Stop signals").
#pragma once

#include <atomic>
#include <thread>

namespace lathe::cli {

class StopSignalThread {
 public:
  /// Starts the waiting thread, then blocks the signals on the calling thread.
  StopSignalThread();
  /// Restores the calling thread's signal mask (a signal pending for it is then handled there) and
  /// ends the waiting thread.
  ~StopSignalThread();
  StopSignalThread(const StopSignalThread&) = delete;
  StopSignalThread& operator=(const StopSignalThread&) = delete;

 private:
  std::atomic<bool> m_quit{false};
  std::thread m_thread;
  bool m_blocked = false;
};

}  // namespace lathe::cli
