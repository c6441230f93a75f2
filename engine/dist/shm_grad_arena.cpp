// ShmGradArena (see shm_grad_arena.h).
#include "engine/dist/shm_grad_arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/core/error.h"

namespace lathe::dist {

namespace {

constexpr int64_t kPage = 4096;
constexpr int64_t kPageFloats = kPage / static_cast<int64_t>(sizeof(float));
constexpr int kArenaMaxRanks = 64;

int64_t segment_bytes(int world_size, int64_t region_elements) {
  return kPage + static_cast<int64_t>(world_size) * region_elements * static_cast<int64_t>(sizeof(float));
}

std::string arena_shm_error(const std::string& what, const std::string& name) {
  return what + " " + name + ": " + std::strerror(errno);
}

}  // namespace

struct ShmGradArena::Mapping {
  void* data = nullptr;
  size_t bytes = 0;
  ~Mapping() {
    if (data)
      munmap(data, bytes);
  }
};

ShmGradArena::Layout ShmGradArena::layout(const std::vector<int64_t>& sizes) {
  Layout l;
  int64_t at = 0;
  for (int64_t n : sizes) {
    LATHE_CHECK(n >= 0, "gradient arena: a gradient of ", n, " elements");
    l.offsets.push_back(at);
    at += (n + 15) / 16 * 16;  // the next one on a cache line of its own
  }
  l.region_elements = std::max<int64_t>(kPageFloats, (at + kPageFloats - 1) / kPageFloats * kPageFloats);
  return l;
}

void ShmGradArena::create(const std::string& name, int world_size, int64_t region_elements) {
  LATHE_CHECK(world_size >= 1 && world_size <= kArenaMaxRanks, "gradient arena: ", world_size, " ranks (1..", kArenaMaxRanks,
              " on one machine)");
  LATHE_CHECK(region_elements >= 1, "gradient arena: regions of ", region_elements, " elements");
  shm_unlink(name.c_str());  // a stale segment of a crashed run with the same name
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    throw Error(arena_shm_error("shm_open", name));
  // The pages reserved now: a /dev/shm too small is an error here, not a SIGBUS in a backward pass.
  const int64_t bytes = segment_bytes(world_size, region_elements);
  const int r = posix_fallocate(fd, 0, bytes);
  close(fd);
  if (r != 0) {
    shm_unlink(name.c_str());
    errno = r;
    throw Error(arena_shm_error("reserving " + std::to_string(bytes) + " bytes of shared memory for", name));
  }
}

void ShmGradArena::unlink(const std::string& name) { shm_unlink(name.c_str()); }

ShmGradArena::ShmGradArena(const std::string& name, int rank, int world_size, int64_t region_elements)
    : m_map(std::make_shared<Mapping>()), m_rank(rank), m_region(region_elements) {
  LATHE_CHECK(world_size >= 1 && world_size <= kArenaMaxRanks && rank >= 0 && rank < world_size, "gradient arena: rank ",
              rank, " of ", world_size);
  LATHE_CHECK(region_elements >= 1, "gradient arena: regions of ", region_elements, " elements");
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    throw Error(arena_shm_error("shm_open", name));
  const auto bytes = static_cast<size_t>(segment_bytes(world_size, region_elements));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    throw Error(arena_shm_error("mmap", name));
  m_map->data = p;
  m_map->bytes = bytes;
}

void ShmGradArena::set_token(uint64_t token) {
  static_cast<std::atomic<uint64_t>*>(m_map->data)->store(token, std::memory_order_release);
}

uint64_t ShmGradArena::token() const {
  return static_cast<std::atomic<uint64_t>*>(m_map->data)->load(std::memory_order_acquire);
}

float* ShmGradArena::base() const { return reinterpret_cast<float*>(static_cast<char*>(m_map->data) + kPage); }

}  // namespace lathe::dist
