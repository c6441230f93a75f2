// ShmAllReduce (see shm_allreduce.h).
#include "engine/dist/shm_allreduce.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/half_arrays.h"

namespace lathe::dist {

namespace {

constexpr int kMaxRanks = 64;
constexpr int64_t kLine = 64;  // a cache line: each counter on its own

struct alignas(kLine) Counter {
  std::atomic<uint64_t> value;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory counters must be lock-free");

// Holds a rank's collective for the duration of one call: the generation counters are shared, so a
// second thread's call would silently interleave with the first one's chunks; it is refused instead.
class OneAtATime {
 public:
  OneAtATime(std::atomic<bool>& busy, int rank) : m_busy(busy) {
    bool idle = false;
    if (!m_busy.compare_exchange_strong(idle, true))
      throw Error("rank " + std::to_string(rank) + ": two shared-memory collectives at once (one thread at a time)");
  }
  ~OneAtATime() { m_busy.store(false); }
  OneAtATime(const OneAtATime&) = delete;
  OneAtATime& operator=(const OneAtATime&) = delete;

 private:
  std::atomic<bool>& m_busy;
};

// Slots hold an even number of f32 elements, so that a slot is also an aligned array of doubles.
int64_t even(int64_t chunk_elements) { return chunk_elements + (chunk_elements & 1); }

std::string shm_error(const std::string& what, const std::string& name) {
  return what + " " + name + ": " + std::strerror(errno);
}

}  // namespace

// A rank's values of a one-synchronisation sum, on cache lines of its own.
struct alignas(kLine) SmallValues {
  double v[ShmAllReduce::kSmallValues];
};

struct ShmAllReduce::Header {
  Counter token;
  Counter pid[kMaxRanks];      ///< each rank's process id, to tell a dead peer from a slow one
  Counter arrived[kMaxRanks];  ///< the generation whose data a rank has put in its slot
  Counter done[kMaxRanks];     ///< the generation whose share of the sum a rank has written
  /// Small sums, area (generation & 1): a rank writes area g & 1 at generation g once every rank
  /// has arrived at g - 1, which each does after it has read generation g - 2's values.
  SmallValues small[2][kMaxRanks];
};

int64_t ShmAllReduce::segment_bytes(int world_size, int64_t chunk_elements) {
  const int64_t data =
      (static_cast<int64_t>(world_size) + 1) * even(chunk_elements) * static_cast<int64_t>(sizeof(float));
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
    : m_rank(rank), m_world(world_size), m_chunk(even(chunk_elements)), m_timeout(timeout) {
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
  m_slots = static_cast<char*>(m_map) + sizeof(Header);
  m_result = m_slots + static_cast<int64_t>(world_size) * m_chunk * static_cast<int64_t>(sizeof(float));
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
                    ") is gone (shared-memory all-reduce)");
      if (std::chrono::steady_clock::now() > deadline)
        throw Error("rank " + std::to_string(m_rank) + ": rank " + std::to_string(k) + " did not " + what + " within " +
                    std::to_string(m_timeout.count() / 1000.0) + " s (shared-memory all-reduce)");
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

template <class T, class Fill, class Combine, class Drain>
void ShmAllReduce::reduce(int64_t total, const char* what, Fill fill, Combine combine, Drain drain) {
  const OneAtATime guard(m_busy, m_rank);
  const int64_t cap = m_chunk * static_cast<int64_t>(sizeof(float)) / static_cast<int64_t>(sizeof(T));
  T* slots = reinterpret_cast<T*>(m_slots);  // slot k: slots + k * cap
  T* out = reinterpret_cast<T*>(m_result);
  for (int64_t start = 0; start < total; start += cap) {
    const int64_t len = std::min(cap, total - start);
    ++m_generation;
    fill(start, len, slots + m_rank * cap);
    m_header->arrived[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(false, what);
    // This rank's share of the chunk.
    const int64_t share = (len + m_world - 1) / m_world;
    const int64_t lo = std::min(len, share * m_rank), hi = std::min(len, lo + share);
    combine(static_cast<const T*>(slots), cap, out, lo, hi);
    m_header->done[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(true, "finish its share of the sum");
    drain(start, len, static_cast<const T*>(out));
    // The next chunk's writes into the slots and the result wait for every rank's arrival at the
    // next generation, which each rank announces only after this copy.
  }
}

namespace {

// out[lo, hi) = the sum over the `world` slots in rank order, divided by `divisor` (when not 1).
template <class T>
void sum_share(const T* slots, int64_t cap, int world, T* out, int64_t lo, int64_t hi, T divisor) {
  for (int64_t i = lo; i < hi; ++i)
    out[i] = slots[i];
  for (int k = 1; k < world; ++k) {
    const T* slot = slots + k * cap;
    for (int64_t i = lo; i < hi; ++i)
      out[i] += slot[i];
  }
  if (divisor != T(1))
    for (int64_t i = lo; i < hi; ++i)
      out[i] /= divisor;
}

// The mean of `world` copies of n floats (copy k at first + k * stride), written into every copy:
// the arithmetic of sum_share (rank order, then one division), in blocks that stay in L1.
void mean_into_every_copy(float* first, int64_t stride, int world, int64_t n, float divisor) {
  constexpr int64_t kBlock = 1024;
  float acc[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const float* src = first + b;
    for (int64_t i = 0; i < m; ++i)
      acc[i] = src[i];
    for (int k = 1; k < world; ++k) {
      src = first + k * stride + b;
      for (int64_t i = 0; i < m; ++i)
        acc[i] += src[i];
    }
    if (divisor != 1.0f)
      for (int64_t i = 0; i < m; ++i)
        acc[i] /= divisor;
    for (int k = 0; k < world; ++k)
      std::memcpy(first + k * stride + b, acc, m * sizeof(float));
  }
}

// The 16-bit formats' conversions: the project's own (dtype.h, half_arrays.h), as the tcp path's.
void widen(ShmAllReduce::Format f, const uint16_t* src, float* dst, int64_t n) {
  if (f == ShmAllReduce::Format::fp16) {
    f16_to_f32_array(src, dst, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    dst[i] = bf16_to_f32(src[i]);
}
void narrow(ShmAllReduce::Format f, const float* src, uint16_t* dst, int64_t n) {
  if (f == ShmAllReduce::Format::fp16) {
    f32_to_f16_array(src, dst, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    dst[i] = f32_to_bf16(src[i]);
}

// 16-bit out[lo, hi) = round16(sum over the slots in rank order of widen(slot) / divisor), summed
// and divided in f32, in blocks that stay in L1.
void mean_share16(ShmAllReduce::Format f, const uint16_t* slots, int64_t cap, int world, uint16_t* out, int64_t lo,
                  int64_t hi, float divisor) {
  constexpr int64_t kBlock = 1024;
  float acc[kBlock], next[kBlock];
  for (int64_t b = lo; b < hi; b += kBlock) {
    const int64_t n = std::min(kBlock, hi - b);
    widen(f, slots + b, acc, n);
    for (int k = 1; k < world; ++k) {
      widen(f, slots + k * cap + b, next, n);
      for (int64_t i = 0; i < n; ++i)
        acc[i] += next[i];
    }
    if (divisor != 1.0f)
      for (int64_t i = 0; i < n; ++i)
        acc[i] /= divisor;
    narrow(f, acc, out + b, n);
  }
}

}  // namespace

void ShmAllReduce::all_reduce_sum(double* data, int64_t n) {
  if (n <= kSmallValues) {
    const OneAtATime guard(m_busy, m_rank);
    ++m_generation;
    auto& area = m_header->small[m_generation & 1];  // kMaxRanks ranks' values
    std::memcpy(area[m_rank].v, data, n * sizeof(double));
    m_header->arrived[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(false, "bring its values");
    for (int64_t i = 0; i < n; ++i) {
      double sum = area[0].v[i];
      for (int k = 1; k < m_world; ++k)
        sum += area[k].v[i];
      data[i] = sum;
    }
    return;
  }
  reduce<double>(
      n, "bring its values",
      [&](int64_t start, int64_t len, double* slot) { std::memcpy(slot, data + start, len * sizeof(double)); },
      [&](const double* slots, int64_t cap, double* out, int64_t lo, int64_t hi) {
        sum_share(slots, cap, m_world, out, lo, hi, 1.0);
      },
      [&](int64_t start, int64_t len, const double* r) { std::memcpy(data + start, r, len * sizeof(double)); });
}

namespace {

// Calls fn(span index, piece pointer, count, offset into [start, start + len)) for the parts of the
// spans' concatenation that fall in [start, start + len).
template <class Fn>
void for_range(const std::vector<ShmAllReduce::Span>& spans, int64_t start, int64_t len, Fn fn) {
  int64_t base = 0;  // where the current span begins in the concatenation
  for (size_t i = 0; i < spans.size(); ++i) {
    const ShmAllReduce::Span& sp = spans[i];
    const int64_t lo = std::max(start, base), hi = std::min(start + len, base + sp.n);
    if (lo < hi)
      fn(i, sp.data + (lo - base), hi - lo, lo - start);
    base += sp.n;
    if (base >= start + len)
      break;
  }
}

int64_t elements(const std::vector<ShmAllReduce::Span>& spans) {
  int64_t total = 0;
  for (const auto& sp : spans)
    total += sp.n;
  return total;
}

}  // namespace

void ShmAllReduce::gather(const std::vector<Span>& spans, const std::vector<int>& owners) {
  LATHE_CHECK(owners.size() == spans.size(), "ShmAllReduce: ", owners.size(), " owners for ", spans.size(), " pieces");
  for (int owner : owners)
    LATHE_CHECK(owner >= 0 && owner < m_world, "ShmAllReduce: owner ", owner, " is not a rank of ", m_world);
  const OneAtATime guard(m_busy, m_rank);
  const int64_t total = elements(spans);
  // A gather does no arithmetic, so it takes the slots and the result area together as one area:
  // (N + 1) chunks a round instead of one, so a third of the rounds (and synchronisations) on 2 ranks.
  auto* result = reinterpret_cast<float*>(m_slots);
  const int64_t cap = (static_cast<int64_t>(m_world) + 1) * m_chunk;
  for (int64_t start = 0; start < total; start += cap) {
    const int64_t len = std::min(cap, total - start);
    ++m_generation;
    // Everyone has copied the previous generation's result out before any owner overwrites it.
    m_header->arrived[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(false, "come to the gather");
    for_range(spans, start, len, [&](size_t i, float* p, int64_t n, int64_t at) {
      if (owners[i] == m_rank)
        std::memcpy(result + at, p, n * sizeof(float));
    });
    m_header->done[m_rank].value.store(m_generation, std::memory_order_release);
    wait_all(true, "send its values");
    for_range(spans, start, len, [&](size_t i, float* p, int64_t n, int64_t at) {
      if (owners[i] != m_rank)
        std::memcpy(p, result + at, n * sizeof(float));
    });
  }
}

void ShmAllReduce::all_reduce_mean_mapped(float* base, int64_t stride, const std::vector<Region>& regions,
                                          float divisor, double* values, int64_t n) {
  LATHE_CHECK(n >= 0 && n <= kSmallValues && (n == 0 || values), "ShmAllReduce: ", n,
              " values with a gradient mean (at most ", kSmallValues, ")");
  const OneAtATime guard(m_busy, m_rank);
  int64_t total = 0;
  for (const Region& r : regions)
    total += r.n;
  ++m_generation;
  // The values take this generation's small area, as all_reduce_sum's do (its rule keeps two
  // generations from sharing one).
  auto& area = m_header->small[m_generation & 1];
  if (n > 0)
    std::memcpy(area[m_rank].v, values, n * sizeof(double));
  m_header->arrived[m_rank].value.store(m_generation, std::memory_order_release);
  wait_all(false, "bring its gradients");
  for (int64_t i = 0; i < n; ++i) {
    double sum = area[0].v[i];
    for (int k = 1; k < m_world; ++k)
      sum += area[k].v[i];
    values[i] = sum;
  }
  // This rank's share of the regions' concatenation, cut at cache lines (16 floats) so that no two
  // ranks write one line of a copy.
  const int64_t share = ((total + m_world - 1) / m_world + 15) / 16 * 16;
  const int64_t lo = std::min(total, share * m_rank), hi = std::min(total, lo + share);
  int64_t at = 0;  // where the current region begins in the concatenation
  for (const Region& r : regions) {
    const int64_t a = std::max(lo, at), b = std::min(hi, at + r.n);
    if (a < b)
      mean_into_every_copy(base + r.offset + (a - at), stride, m_world, b - a, divisor);
    at += r.n;
    if (at >= hi)
      break;
  }
  m_header->done[m_rank].value.store(m_generation, std::memory_order_release);
  wait_all(true, "finish its share of the sum");
}

void ShmAllReduce::broadcast(const std::vector<Span>& spans, int root) {
  gather(spans, std::vector<int>(spans.size(), root));
}

void ShmAllReduce::all_reduce_mean(const std::vector<Span>& spans, float divisor, Format format) {
  if (format == Format::f32) {
    reduce<float>(
        elements(spans), "bring its gradients",
        [&](int64_t start, int64_t len, float* slot) {
          for_range(spans, start, len,
                    [&](size_t, float* p, int64_t n, int64_t at) { std::memcpy(slot + at, p, n * sizeof(float)); });
        },
        [&](const float* slots, int64_t cap, float* out, int64_t lo, int64_t hi) {
          sum_share(slots, cap, m_world, out, lo, hi, divisor);
        },
        [&](int64_t start, int64_t len, const float* r) {
          for_range(spans, start, len,
                    [&](size_t, float* p, int64_t n, int64_t at) { std::memcpy(p, r + at, n * sizeof(float)); });
        });
    return;
  }
  reduce<uint16_t>(
      elements(spans), "bring its gradients",
      [&](int64_t start, int64_t len, uint16_t* slot) {
        for_range(spans, start, len, [&](size_t, float* p, int64_t n, int64_t at) { narrow(format, p, slot + at, n); });
      },
      [&](const uint16_t* slots, int64_t cap, uint16_t* out, int64_t lo, int64_t hi) {
        mean_share16(format, slots, cap, m_world, out, lo, hi, divisor);
      },
      [&](int64_t start, int64_t len, const uint16_t* r) {
        for_range(spans, start, len, [&](size_t, float* p, int64_t n, int64_t at) { widen(format, r + at, p, n); });
      });
}

}  // namespace lathe::dist
