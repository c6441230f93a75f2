// ShmAllReduce (see shm_allreduce.h).
#include "engine/dist/shm_allreduce.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "engine/core/error.h"

namespace lathe::dist {

namespace {

constexpr int kMaxRanks = 64;
constexpr int64_t kLine = 64;  // a cache line: each counter on its own

struct alignas(kLine) Counter {
  std::atomic<uint64_t> value;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");

std::string shm_error(const std::string& what, const std::string& name) {
  return what + " " + name + ": " + std::strerror(errno);
}

}  // namespace

struct ShmAllReduce::Header {
  Counter token;
  Counter pid[kMaxRanks];      ///< each rank's process id, to tell a dead peer from a slow one
  Counter arrived[kMaxRanks];  ///< the generation whose data a rank has put in its slot
  Counter done[kMaxRanks];     ///< the generation whose share of the sum a rank has written
};

int64_t ShmAllReduce::segment_bytes(int world_size, int64_t chunk_elements) {
  const int64_t data = (static_cast<int64_t>(world_size) + 1) * chunk_elements * static_cast<int64_t>(sizeof(float));
  return static_cast<int64_t>(sizeof(Header)) + data;
}

void ShmAllReduce::create(const std::string& name, int world_size, int64_t chunk_elements) {
  LATHE_CHECK(world_size >= 1 && world_size <= kMaxRanks, "ShmAllReduce: ", world_size, " ranks (1..", kMaxRanks,
              " on one machine)");
  LATHE_CHECK(chunk_elements >= 1, "ShmAllReduce: chunk of ", chunk_elements, " elements");
  shm_unlink(name.c_str());  // a stale segment of a crashed run with the same id
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    throw Error(shm_error("shm_open", name));
  // Reserve the pages now: a /dev/shm too small (containers default to 64 MiB) is an error here,
  // not a SIGBUS in the middle of a step.
  const int64_t bytes = segment_bytes(world_size, chunk_elements);
  const int r = posix_fallocate(fd, 0, bytes);
  close(fd);
  if (r != 0) {
    shm_unlink(name.c_str());
    errno = r;
    throw Error(shm_error("reserving " + std::to_string(bytes) + " bytes of shared memory for", name));
  }
}

void ShmAllReduce::unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmAllReduce::ShmAllReduce(const std::string& name, int rank, int world_size, int64_t chunk_elements,
                           std::chrono::milliseconds timeout)
    : m_rank(rank), m_world(world_size), m_chunk(chunk_elements), m_timeout(timeout) {
  LATHE_CHECK(world_size >= 1 && world_size <= kMaxRanks && rank >= 0 && rank < world_size, "ShmAllReduce: rank ", rank,
              " of ", world_size);
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    throw Error(shm_error("shm_open", name));
  m_map_bytes = segment_bytes(world_size, chunk_elements);
  m_map = mmap(nullptr, static_cast<size_t>(m_map_bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m_map == MAP_FAILED) {
    m_map = nullptr;
    throw Error(shm_error("mmap", name));
  }
  m_header = static_cast<Header*>(m_map);
  m_header->pid[rank].value.store(static_cast<uint64_t>(getpid()), std::memory_order_release);
  m_slots = reinterpret_cast<float*>(static_cast<char*>(m_map) + sizeof(Header));
  m_result = m_slots + static_cast<int64_t>(world_size) * chunk_elements;
}

ShmAllReduce::~ShmAllReduce() {
  if (m_map)
    munmap(m_map, static_cast<size_t>(m_map_bytes));
}

void ShmAllReduce::wait_all(bool done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + m_timeout;
  for (int k = 0; k < m_world; ++k) {
    std::atomic<uint64_t>& c = (done ? m_header->done : m_header->arrived)[k].value;
    for (int spins = 0; c.load(std::memory_order_acquire) < m_generation; ++spins) {
      // Spin briefly (the other rank is usually a few microseconds away), then give the core up:
      // on a machine with fewer cores than ranks and threads the peer needs it to get here.
      if (spins < 64)
        continue;
      if (spins < 1024) {
        sched_yield();
        continue;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if ((spins & 255) != 0)
        continue;
      // A peer whose process is gone never arrives: say so now rather than at the timeout.
      const auto pid = static_cast<pid_t>(m_header->pid[k].value.load(std::memory_order_acquire));
      if (m_watch_pids && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
        throw Error("rank " + std::to_string(m_rank) + ": rank " + std::to_string(k) + " (pid " + std::to_string(pid) +
                    ") is gone (shared-memory all-reduce of the gradients)");
      if (std::chrono::steady_clock::now() > deadline)
        throw Error("rank " + std::to_string(m_rank) + ": rank " + std::to_string(k) + " did not " + what + " within " +
                    std::to_string(m_timeout.count() / 1000.0) + " s (shared-memory all-reduce of the gradients)");
    }
  }
}

void ShmAllReduce::watch_peers() {
  // Only where every peer's process id is visible from here (one pid namespace): elsewhere a live
  // peer could look gone.
  m_watch_pids = true;
  for (int k = 0; k < m_world; ++k) {
    const auto pid = static_cast<pid_t>(m_header->pid[k].value.load(std::memory_order_acquire));
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH))
      m_watch_pids = false;
  }
}

void ShmAllReduce::set_token(uint64_t token) { m_header->token.value.store(token, std::memory_order_release); }
uint64_t ShmAllReduce::token() const { return m_header->token.value.load(std::memory_order_acquire); }

void ShmAllReduce::all_reduce_sum(float* data, int64_t n) {
  for (int64_t start = 0; start < n; start += m_chunk) {
    const int64_t len = std::min(m_chunk, n - start);
    ++m_generation;
    std::memcpy(m_slots + m_rank * m_chunk, data + start, static_cast<size_t>(len) * sizeof(float));
    m_header->arrived[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(false, "bring its gradients");
    // This rank's share of the chunk, summed over the slots in rank order.
    const int64_t share = (len + m_world - 1) / m_world;
    const int64_t lo = std::min(len, share * m_rank), hi = std::min(len, lo + share);
    float* out = m_result;
    for (int64_t i = lo; i < hi; ++i)
      out[i] = m_slots[i];
    for (int k = 1; k < m_world; ++k) {
      const float* slot = m_slots + k * m_chunk;
      for (int64_t i = lo; i < hi; ++i)
        out[i] += slot[i];
    }
    m_header->done[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(true, "finish its share of the sum");
    std::memcpy(data + start, m_result, static_cast<size_t>(len) * sizeof(float));
    // The next chunk's writes into the slots and the result wait for every rank's arrival at the
    // next generation, which each rank announces only after this copy.
  }
}

}  // namespace lathe::dist
