// Removal of registered temporary files on SIGINT/SIGTERM/SIGHUP (see temp_files.h).
#include "engine/core/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace lathe {

namespace {

constexpr int kSlots = 16;
constexpr size_t kMaxPath = 4096;

struct Slot {
  std::atomic<bool> used{false};   ///< claimed by a guard
  std::atomic<bool> ready{false};  ///< path written: the handler may read it
  char path[kMaxPath];
};
Slot g_slots[kSlots];

void on_signal(int sig) {
  for (Slot& s : g_slots)
    if (s.ready.load())
      ::unlink(s.path);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_temp_file_cleanup() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(sig, &sa, nullptr);
}

TempFileGuard::TempFileGuard(const std::string& path) {
  if (path.size() >= kMaxPath)
    return;
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (g_slots[i].used.compare_exchange_strong(expected, true)) {
      std::memcpy(g_slots[i].path, path.c_str(), path.size() + 1);
      g_slots[i].ready.store(true);
      m_slot = i;
      return;
    }
  }
}

TempFileGuard::~TempFileGuard() {
  if (m_slot < 0)
    return;
  g_slots[m_slot].ready.store(false);
  g_slots[m_slot].used.store(false);
}

}  // namespace lathe
