// lathe-cli's StopSignalThread (app/cli_signals.h): while it lives, the stop signals are blocked on
// the thread that made it and on the threads that thread starts, and a signal sent to the process
// is handled on another thread, never on the training thread. Before it, a 2-rank run stopped by a
// signal that landed on its training thread ended with a corrupted heap in ~7% of the runs.
#include <gtest/gtest.h>

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "app/cli_signals.h"

namespace lathe::cli {
namespace {

std::atomic<bool> g_handled{false};
std::atomic<pthread_t> g_handled_on{};

void record_thread(int) {
  g_handled_on.store(pthread_self());
  g_handled.store(true);
}

bool blocked_here(int sig) {
  sigset_t now;
  pthread_sigmask(SIG_SETMASK, nullptr, &now);
  return sigismember(&now, sig) == 1;
}

TEST(StopSignalThread, TheTrainingThreadNeverTakesAStopSignal) {
  struct sigaction sa {}, old {};
  sa.sa_handler = record_thread;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  ASSERT_FALSE(blocked_here(SIGUSR1));
  {
    const StopSignalThread guard;
    for (int sig : {SIGINT, SIGTERM, SIGUSR1})
      EXPECT_TRUE(blocked_here(sig)) << sig;
    bool inherited = false;  // a thread the training thread starts (OpenMP's, the loader's) blocks them too
    std::thread([&] { inherited = blocked_here(SIGTERM) && blocked_here(SIGUSR1); }).join();
    EXPECT_TRUE(inherited);
    const pthread_t self = pthread_self();
    for (int i = 0; i < 20; ++i) {  // the process-directed signal goes to the waiting thread, every time
      g_handled.store(false);
      ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
      for (int k = 0; k < 200 && !g_handled.load(); ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_TRUE(g_handled.load()) << "the signal was not handled within 1 s";
      EXPECT_FALSE(pthread_equal(g_handled_on.load(), self)) << "handled on the training thread";
    }
  }
  EXPECT_FALSE(blocked_here(SIGUSR1));  // the mask is as before
  EXPECT_FALSE(blocked_here(SIGTERM));
  sigaction(SIGUSR1, &old, nullptr);
}

}  // namespace
}  // namespace lathe::cli
