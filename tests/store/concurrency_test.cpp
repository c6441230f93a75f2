// Readers while a writer runs, in threads and in another process: every snapshot holds whole
// batches (samples a prefix, summary and blocks in step with them), and a reader holding a read
// transaction open does not stop the writer from committing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>

#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;
using namespace std::chrono_literals;

double value_of(int64_t step) { return static_cast<double>(step) * 0.5; }

RunInfo run_info(const std::string& id) {
  RunInfo i;
  i.id = id;
  i.name = id;
  return i;
}

// A read-only open (the other ranks of a launcher's `lathe-cli resume`, list, the GUI) while another
// connection holds the store locked (rank 0 reaping and repairing the run, a closing writer's
// checkpoint) waits for the lock like every other statement, instead of failing "database is locked".
TEST(StoreConcurrency, AReadOnlyOpenWaitsOutALock) {
  StoreDir dir;
  {
    RunWriter w(dir.db());
    w.begin_run(run_info("t"));
    w.finish(RunStatus::finished);
  }
  auto locker = std::make_unique<sql::Db>(dir.db(), 5000, /*read_only=*/false);
  locker->exec("PRAGMA locking_mode=EXCLUSIVE");
  locker->exec("BEGIN EXCLUSIVE");
  std::thread release([&] {
    std::this_thread::sleep_for(300ms);
    locker.reset();  // rollback and close: the lock goes
  });
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Store s = Store::open(dir.db(), Store::read_only_options());
    EXPECT_EQ(s.run("t").status, RunStatus::finished);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "the read-only open did not wait for the lock: " << e.what();
  }
  release.join();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);  // it did wait: the lock was there
}

TEST(StoreConcurrency, ReaderThreadsSeeWholeBatches) {
  StoreDir dir;
  constexpr int64_t kSamples = 150'000;
  WriterOptions o;
  o.commit_interval_ms = 5;
  o.batch_rows = 777;
  RunWriter w(dir.db(), o);
  w.begin_run(run_info("t"));

  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::array<std::atomic<int>, 2> snapshots{};  // per reader, how many it has taken
  std::vector<std::set<int64_t>> seen(2);
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&, r] {
      Store s = Store::open(dir.db());
      while (!done.load()) {
        const test::SeriesSnapshot snap = test::snapshot_series(s.db(), "t", "m", value_of);
        if (!snap.consistent())
          ++bad;
        seen[r].insert(snap.samples);
        ++snapshots[r];
      }
    });
  // At a few checkpoints the writer commits what it has (flush) and waits until both readers have
  // taken two more snapshots, so each watches the run grow however busy the machine is (a sleep of a
  // few commit intervals was not enough under ASan on a loaded machine: the writer thread had not
  // committed yet, and a reader saw only two sizes).
  auto let_the_readers_look = [&] {
    w.flush();
    const int a = snapshots[0].load(), b = snapshots[1].load();
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while ((snapshots[0].load() < a + 2 || snapshots[1].load() < b + 2) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  };
  for (int64_t step = 0; step < kSamples; ++step) {
    w.sample("m", step, 0.0, value_of(step));
    if (step % 30'000 == 29'999)
      let_the_readers_look();
  }
  w.finish(RunStatus::finished);
  done = true;
  for (auto& t : readers)
    t.join();
  EXPECT_EQ(bad.load(), 0);
  for (const auto& s : seen)
    EXPECT_GE(s.size(), 3u) << "the readers should have watched the run grow";
  Store s = Store::open(dir.db());
  const test::SeriesSnapshot final_snap = test::snapshot_series(s.db(), "t", "m", value_of);
  EXPECT_TRUE(final_snap.consistent());
  EXPECT_EQ(final_snap.samples, kSamples);
}

TEST(StoreConcurrency, AnOpenReadTransactionDoesNotBlockTheWriter) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(run_info("long"));
  for (int64_t step = 0; step < 1000; ++step)
    w.sample("m", step, 0.0, value_of(step));
  w.flush();

  Store reader = Store::open(dir.db());
  sql::Txn hold(reader.db(), sql::Txn::Kind::read);
  const auto count = [&] { return reader.db().query_int("SELECT count(*) FROM samples").value_or(-1); };
  EXPECT_EQ(count(), 1000);  // the snapshot starts here
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 1000; step < 50'000; ++step)
    w.sample("m", step, 0.0, value_of(step));
  w.flush();  // commits while the reader still holds its snapshot
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  EXPECT_EQ(w.committed_samples(), 50'000);
  EXPECT_EQ(count(), 1000);  // the reader's snapshot is stable
  hold.commit();
  EXPECT_EQ(count(), 50'000);
  w.finish(RunStatus::finished);
}

TEST(StoreConcurrency, ReaderProcessSeesWholeBatches) {
  StoreDir dir;
  constexpr int64_t kSamples = 100'000;
  { Store::open(dir.db()); }  // create the file before forking; no connection crosses the fork
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Reader process: exit 0 when every snapshot was consistent and the finished run is complete.
    int code = 3;
    try {
      Store s = Store::open(dir.db());
      std::set<int64_t> sizes;
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      code = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        const test::SeriesSnapshot snap = test::snapshot_series(s.db(), "p", "m", value_of);
        if (!snap.consistent())
          code = 1;
        sizes.insert(snap.samples);
        const std::optional<RunRecord> r = s.find_run("p");
        if (r && r->status == RunStatus::finished) {
          const test::SeriesSnapshot last = test::snapshot_series(s.db(), "p", "m", value_of);
          if (!last.consistent() || last.samples != kSamples)
            code = 1;
          if (code == 0 && sizes.size() < 3)
            code = 2;  // never saw the run in progress
          break;
        }
      }
    } catch (...) {
      code = 4;
    }
    _exit(code);
  }
  {
    WriterOptions o;
    o.commit_interval_ms = 5;
    o.batch_rows = 1000;
    RunWriter w(dir.db(), o);
    w.begin_run(run_info("p"));
    for (int64_t step = 0; step < kSamples; ++step) {
      w.sample("m", step, 0.0, value_of(step));
      if (step % 2000 == 0)
        std::this_thread::sleep_for(2ms);  // let the reader watch it grow
    }
    w.finish(RunStatus::finished);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: inconsistent snapshot, 2: never saw progress, 3/4: reader failed";
}

}  // namespace
}  // namespace lathe
