// kill -9 of a writer process at a random moment, several times: the file passes
// integrity_check, the next open marks the run interrupted, every committed batch is intact (the
// samples are a prefix of what was sent, summaries and blocks agree with them), nothing the writer
// had flushed is lost, and the run resumes without writing any step twice.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <thread>

#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;
using namespace std::chrono_literals;

double loss_of(int64_t step) { return 1.0 / (1.0 + static_cast<double>(step)); }
double acc_of(int64_t step) { return static_cast<double>(step % 1000) / 1000.0; }

/// Child: writes loss and acc for steps 0, 1, 2, ... forever; after every flush() it reports the
/// last flushed step on `fd` (8 bytes), so the parent knows what must survive.
[[noreturn]] void writer_child(const std::string& db, const std::string& run_id, int fd) {
  try {
    WriterOptions o;
    o.commit_interval_ms = 3;
    o.batch_rows = 512;
    RunWriter w(db, o);
    RunInfo info;
    info.id = run_id;
    info.name = "crash";
    info.config = {{"train", {{"lr", 0.1}}}};
    w.begin_run(info);
    for (int64_t step = 0;; ++step) {
      w.sample("train/loss", step, static_cast<double>(step), loss_of(step));
      w.sample("train/acc", step, static_cast<double>(step), acc_of(step));
      if (step % 2000 == 1999) {
        w.flush();
        if (write(fd, &step, sizeof(step)) != sizeof(step))
          _exit(3);
      }
    }
  } catch (...) {
    _exit(2);
  }
}

struct Crash {
  int64_t flushed = -1;  // the last step the child reported as flushed before it died
};

Crash run_and_kill(const std::string& db, const std::string& run_id, std::mt19937& rng) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    writer_child(db, run_id, fds[1]);
  }
  close(fds[1]);
  Crash c;
  // Let it get going (at least one flush), then kill it at a random moment within ~150 ms.
  int64_t step = 0;
  if (read(fds[0], &step, sizeof(step)) == sizeof(step))
    c.flushed = step;
  std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 150'000)(rng)));
  kill(child, SIGKILL);
  while (read(fds[0], &step, sizeof(step)) == sizeof(step))
    c.flushed = step;  // reports sent before death
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child died on its own: " << status;
  return c;
}

TEST(StoreCrash, KillNineLosesOnlyTheUncommittedBatch) {
  StoreDir dir;
  { Store::open(dir.db()); }  // no connection crosses a fork
  std::mt19937 rng(static_cast<uint32_t>(std::random_device{}()));
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string id = "crash-" + std::to_string(round);
    const Crash c = run_and_kill(dir.db(), id, rng);
    ASSERT_GE(c.flushed, 0) << "the writer never flushed";

    {
      sql::Db raw(dir.db());
      EXPECT_EQ(raw.query_text("PRAGMA integrity_check").value_or(""), "ok");
      EXPECT_EQ(raw.query_text("SELECT status FROM runs WHERE id = '" + id + "'").value_or(""), "running");
    }
    Store s = Store::open(dir.db());  // the next open by anyone notices the dead writer
    const RunRecord r = s.run(id);
    EXPECT_EQ(r.status, RunStatus::interrupted);
    ASSERT_FALSE(s.events(id).empty());
    EXPECT_EQ(s.events(id).back().fields["to"], "interrupted");

    const test::SeriesSnapshot loss = test::snapshot_series(s.db(), id, "train/loss", loss_of);
    const test::SeriesSnapshot acc = test::snapshot_series(s.db(), id, "train/acc", acc_of);
    EXPECT_TRUE(loss.consistent()) << loss.samples << " samples, max step " << loss.max_step;
    EXPECT_TRUE(acc.consistent()) << acc.samples << " samples, max step " << acc.max_step;
    EXPECT_GT(loss.samples, c.flushed) << "a flushed step was lost";
    EXPECT_GT(acc.samples, c.flushed);
    // One batch holds both metrics of a step, except when a batch boundary falls between them.
    EXPECT_LE(std::abs(loss.samples - acc.samples), 1);

    // Resume: the trainer restarts from its last checkpoint, 500 steps back; nothing is duplicated.
    const int64_t resumed_from = std::max<int64_t>(0, loss.max_step - 500);
    RunWriter w(dir.db());
    const ResumePoint rp = w.resume(id);
    EXPECT_EQ(rp.last_step.at("train/loss"), loss.max_step);
    for (int64_t step = resumed_from; step <= loss.max_step + 1000; ++step) {
      w.sample("train/loss", step, static_cast<double>(step), loss_of(step));
      w.sample("train/acc", step, static_cast<double>(step), acc_of(step));
    }
    w.finish(RunStatus::finished);
    const test::SeriesSnapshot after = test::snapshot_series(s.db(), id, "train/loss", loss_of);
    EXPECT_TRUE(after.consistent());
    EXPECT_EQ(after.samples, loss.max_step + 1001);
    EXPECT_EQ(s.run(id).status, RunStatus::finished);
  }
  sql::Db raw(dir.db());
  EXPECT_EQ(raw.query_text("PRAGMA integrity_check").value_or(""), "ok");
}

}  // namespace
}  // namespace lathe
