// StopSignalThread: see cli_signals.h.
#include "app/cli_signals.h"

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstring>

#include "engine/core/error.h"

namespace lathe::cli {

namespace {

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

}  // namespace

StopSignalThread::StopSignalThread() {
  // The thread is started before the mask is set, so it keeps the signals unblocked: the handler
  // runs on it, interrupting nothing but its sleep.
  m_thread = std::thread([this] {
    while (!m_quit.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  });
  const sigset_t set = stop_signals();
  const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (rc != 0) {
    m_quit.store(true);
    m_thread.join();
    throw Error(std::string("cannot block the stop signals on the training thread: ") + std::strerror(rc));
  }
  m_blocked = true;
}

StopSignalThread::~StopSignalThread() {
  if (m_blocked) {
    const sigset_t set = stop_signals();
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
  m_quit.store(true);
  if (m_thread.joinable())
    m_thread.join();
}

}  // namespace lathe::cli
