// StreamBlockPool: the free-block bookkeeping of the caching CUDA allocator (cuda_allocator.h), kept
// free of CUDA (header-only) so that it is unit-tested on the CPU with a fake stream clock
// (tests/backend/stream_block_pool_test.cpp).
//
// One pool per device, shared by every backend on it, each backend with its own stream. A block given
// back is guarded by one event per stream registered at that moment, recorded then: the work those
// streams issued before the free is all that may still touch the block. A stream S may take a cached
// block once every guard event on a stream other than S has completed; its own is not needed, since
// S runs its later work after its earlier work. An allocation made outside any stream's scope
// (kNoStream) needs every guard completed, unless the device has a single registered stream, which
// is then the stream it is for (one backend per device: reuse as soon as the block is freed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace lathe::cuda {

using StreamId = std::uintptr_t;  // a cudaStream_t's value
using EventId = std::uintptr_t;   // what a StreamClock hands out; 0 is an event that has completed
inline constexpr StreamId kNoStream = 0;

/// What the pool asks of the device: events recorded on streams, and whether they have completed.
class StreamClock {
 public:
  virtual ~StreamClock() = default;
  /// An event recorded on `stream` now (completes once the work issued there so far has run).
  virtual EventId record(StreamId stream) noexcept = 0;
  virtual bool done(EventId event) noexcept = 0;
  /// The pool no longer needs `event`.
  virtual void release(EventId event) noexcept = 0;
};

class StreamBlockPool {
 public:
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
  };

  explicit StreamBlockPool(StreamClock& clock) : m_clock(clock) {}
  ~StreamBlockPool() {
    drain([](void*, size_t) {});
  }
  StreamBlockPool(const StreamBlockPool&) = delete;
  StreamBlockPool& operator=(const StreamBlockPool&) = delete;

  /// A stream whose work may touch this device's blocks (a backend's, from its creation).
  void add_stream(StreamId stream) { ++registrations(stream); }
  /// Call once the stream has finished its work (synchronised) and issues no more.
  void remove_stream(StreamId stream) {
    for (auto it = m_streams.begin(); it != m_streams.end(); ++it)
      if (it->first == stream) {
        if (--it->second == 0)
          m_streams.erase(it);
        return;
      }
  }
  size_t stream_count() const { return m_streams.size(); }

  /// The stream an allocation is for: `scoped` (the stream whose op is running on this thread), else
  /// the device's only registered stream, else kNoStream.
  StreamId resolve(StreamId scoped) const {
    if (scoped != kNoStream)
      return scoped;
    return m_streams.size() == 1 ? m_streams.front().first : kNoStream;
  }

  /// A cached block of at least `size` bytes but not more than twice that, which `stream` may use now
  /// (see the header comment); nullopt if there is none. Looks at the smallest kMaxScan candidates.
  std::optional<Block> take(size_t size, StreamId stream) {
    int scanned = 0;
    for (auto it = m_free.lower_bound(size); it != m_free.end() && it->first <= 2 * size && scanned < kMaxScan;
         ++it, ++scanned) {
      if (!usable(it->second, stream))
        continue;
      const Block block{it->second.ptr, it->first};
      release_guards(it->second);
      m_cached -= it->first;
      m_free.erase(it);
      return block;
    }
    return std::nullopt;
  }

  /// Caches a block given back now, guarded by an event on every registered stream.
  void put(Block block) {
    Entry e;
    e.ptr = block.ptr;
    e.guards.reserve(m_streams.size());
    for (const auto& [s, count] : m_streams)
      e.guards.emplace_back(s, m_clock.record(s));
    m_free.emplace(block.size, std::move(e));
    m_cached += block.size;
  }

  /// Empties the cache, handing each block to `free_block(ptr, size)`. The caller makes sure the
  /// device is idle first (cudaFree of memory still in use by pending work is an error).
  template <class FreeBlock>
  void drain(FreeBlock&& free_block) {
    for (auto& [size, e] : m_free) {
      release_guards(e);
      free_block(e.ptr, size);
    }
    m_free.clear();
    m_cached = 0;
  }

  size_t cached_bytes() const { return m_cached; }
  size_t cached_blocks() const { return m_free.size(); }

  static constexpr int kMaxScan = 16;

 private:
  struct Entry {
    void* ptr = nullptr;
    std::vector<std::pair<StreamId, EventId>> guards;
  };

  int& registrations(StreamId stream) {
    for (auto& [s, count] : m_streams)
      if (s == stream)
        return count;
    return m_streams.emplace_back(stream, 0).second;
  }

  /// Every guard on another stream has completed; completed guards are released on the way.
  bool usable(Entry& e, StreamId stream) {
    for (auto it = e.guards.begin(); it != e.guards.end();) {
      if (stream != kNoStream && it->first == stream) {
        ++it;
        continue;
      }
      if (!m_clock.done(it->second))
        return false;
      m_clock.release(it->second);
      it = e.guards.erase(it);
    }
    return true;
  }

  void release_guards(Entry& e) {
    for (const auto& [s, ev] : e.guards)
      m_clock.release(ev);
    e.guards.clear();
  }

  StreamClock& m_clock;
  std::vector<std::pair<StreamId, int>> m_streams;  // registered streams, with how many registered each
  std::multimap<size_t, Entry> m_free;              // block size -> block, smallest first
  size_t m_cached = 0;
};

}  // namespace lathe::cuda
