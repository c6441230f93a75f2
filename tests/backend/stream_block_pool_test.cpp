// The caching CUDA allocator's bookkeeping (engine/backend/cuda/stream_block_pool.h) on the CPU,
// with a fake stream clock: each stream counts the work issued on it and the work that has run, an
// event is "the work issued so far", and it completes once that much has run. The rule under test:
// a block freed while stream A's work on it is pending goes to A again at once, to any other stream
// only after the event recorded on A at free time has completed.
#include "engine/backend/cuda/stream_block_pool.h"

#include <gtest/gtest.h>

#include <map>

namespace lathe::cuda {
namespace {

class FakeClock final : public StreamClock {
 public:
  void issue(StreamId s, int n = 1) { m_issued[s] += n; }
  void run_all(StreamId s) { m_ran[s] = m_issued[s]; }

  EventId record(StreamId s) noexcept override {
    const EventId id = ++m_next;
    m_events[id] = {s, m_issued[s]};
    ++records;
    return id;
  }
  bool done(EventId e) noexcept override {
    const auto& [s, mark] = m_events.at(e);
    return m_ran[s] >= mark;
  }
  void release(EventId e) noexcept override { m_events.erase(e); }
  size_t live_events() const { return m_events.size(); }

  int records = 0;

 private:
  std::map<StreamId, long> m_issued, m_ran;
  std::map<EventId, std::pair<StreamId, long>> m_events;
  EventId m_next = 0;
};

constexpr StreamId kA = 0xA0, kB = 0xB0;

void* block(int i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x10000 * i)); }

TEST(StreamBlockPool, SameStreamReusesAtOnceOtherStreamWaitsForTheFreeEvent) {
  FakeClock clock;
  StreamBlockPool pool(clock);
  pool.add_stream(kA);
  pool.add_stream(kB);
  clock.issue(kA, 3);  // A's kernels on the block are still pending when it is freed
  pool.put({block(1), 4096});
  EXPECT_EQ(pool.cached_bytes(), 4096u);

  EXPECT_FALSE(pool.take(4096, kB)) << "B would write a block A's pending work still reads";
  EXPECT_FALSE(pool.take(4096, kNoStream)) << "an allocation outside any op must wait for every stream";
  clock.issue(kA, 5);  // later work on A does not matter: only what was issued before the free
  clock.run_all(kA);
  const auto got = pool.take(4096, kB);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->ptr, block(1));
  EXPECT_EQ(got->size, 4096u);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_EQ(clock.live_events(), 0u) << "guard events released when the block is taken";

  // Freed with A pending again: A itself takes it back at once (stream order protects it).
  clock.issue(kA);
  pool.put(*got);
  const auto again = pool.take(4000, kA);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->ptr, block(1));
  EXPECT_EQ(clock.live_events(), 0u);
}

TEST(StreamBlockPool, WaitsForEveryOtherStreamThatHadWorkPending) {
  FakeClock clock;
  StreamBlockPool pool(clock);
  pool.add_stream(kA);
  pool.add_stream(kB);
  clock.issue(kA);
  clock.issue(kB);  // a tensor of A's used by B too: both may still touch it
  pool.put({block(1), 1024});
  clock.run_all(kB);
  EXPECT_FALSE(pool.take(1024, kB)) << "A's work from before the free has not run";
  clock.run_all(kA);
  EXPECT_TRUE(pool.take(1024, kB));
}

TEST(StreamBlockPool, OneRegisteredStreamIsWhatUnscopedAllocationsAreFor) {
  FakeClock clock;
  StreamBlockPool pool(clock);
  EXPECT_EQ(pool.resolve(kNoStream), kNoStream);
  pool.add_stream(kA);
  EXPECT_EQ(pool.resolve(kNoStream), kA);
  EXPECT_EQ(pool.resolve(kB), kB);
  clock.issue(kA);
  pool.put({block(1), 512});
  EXPECT_TRUE(pool.take(512, pool.resolve(kNoStream))) << "a single backend reuses its blocks at once";
  pool.add_stream(kB);
  EXPECT_EQ(pool.resolve(kNoStream), kNoStream) << "two backends: nobody knows which stream will use it";
  pool.remove_stream(kB);
  EXPECT_EQ(pool.resolve(kNoStream), kA);
}

TEST(StreamBlockPool, AStreamRegisteredAfterTheFreeStillWaitsForTheStreamsBefore) {
  FakeClock clock;
  StreamBlockPool pool(clock);
  pool.add_stream(kA);
  clock.issue(kA);
  pool.put({block(1), 512});  // guarded by A only: B did not exist
  pool.add_stream(kB);
  EXPECT_FALSE(pool.take(512, kB));
  clock.run_all(kA);
  EXPECT_TRUE(pool.take(512, kB));
}

TEST(StreamBlockPool, SizeWindowSmallestFirstAndBusyBlocksSkipped) {
  FakeClock clock;
  StreamBlockPool pool(clock);
  pool.add_stream(kA);
  pool.add_stream(kB);
  pool.put({block(1), 8192});  // nothing pending: free for anyone
  clock.issue(kA);
  pool.put({block(2), 2048});  // A pending
  pool.put({block(3), 4096});  // A pending
  EXPECT_FALSE(pool.take(512, kB)) << "no block more than twice the size asked for";
  EXPECT_FALSE(pool.take(2048, kB)) << "the 2048 and 4096 blocks are busy on A, 8192 is over 2x";
  const auto big = pool.take(4096, kB);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->ptr, block(1)) << "the busy 4096 block is skipped, the idle 8192 one taken";
  const auto small = pool.take(2048, kA);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->ptr, block(2)) << "smallest fitting block first";
  EXPECT_EQ(pool.cached_bytes(), 4096u);
}

TEST(StreamBlockPool, DrainHandsBackEveryBlockAndReleasesEveryEvent) {
  FakeClock clock;
  StreamBlockPool pool(clock);
  pool.add_stream(kA);
  pool.add_stream(kB);
  clock.issue(kA);
  for (int i = 1; i <= 5; ++i)
    pool.put({block(i), static_cast<size_t>(512 * i)});
  EXPECT_EQ(clock.records, 10) << "one event per registered stream per free";
  size_t freed = 0;
  int blocks = 0;
  pool.drain([&](void*, size_t size) {
    freed += size;
    ++blocks;
  });
  EXPECT_EQ(blocks, 5);
  EXPECT_EQ(freed, 512u * 15);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  EXPECT_EQ(pool.cached_blocks(), 0u);
  EXPECT_EQ(clock.live_events(), 0u);
}

}  // namespace
}  // namespace lathe::cuda
