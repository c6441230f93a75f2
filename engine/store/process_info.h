// Who is writing: this host's name and pid, whether a pid on this host is still alive, and the
// wall clock in Unix milliseconds. The store uses these for stale-writer detection.
#pragma once

#include <cstdint>
#include <string>

namespace lathe::store_detail {

std::string host_name();
int64_t current_pid();
/// True when `pid` names a live (not zombie) process on this host.
bool process_alive(int64_t pid);
int64_t unix_ms();

}  // namespace lathe::store_detail
