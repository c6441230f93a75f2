// lathe-cli when the disk is full or the store was locked (issue 11, items 3 and 4): export to a
// full disk or past a file size limit fails with the file named, a non-zero exit and no partial
// file; an incomplete run is flagged by list and show, and `lathe-cli repair` re-imports its
// samples from metrics.jsonl, idempotently.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/data/dataset.h"
#include "engine/run/metrics_sink.h"
#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "tests/support/run_shell.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using test::CmdResult;

/// Runs `shell` (a command line in which LATHE_CLI stands for the binary) through bash.
CmdResult run_sh(std::string shell) {
  const std::string cli = std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli";
  for (size_t at; (at = shell.find("LATHE_CLI")) != std::string::npos;)
    shell.replace(at, 9, cli);
  return test::run_shell("bash -c '" + shell + "'");
}

class CliDurability : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("lathe-cli-durability-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }
  std::string db() const { return (m_dir / "lathe.db").string(); }
  std::string file(const std::string& name) const { return (m_dir / name).string(); }

  /// A finished run of `n` samples written straight through the store writer.
  void make_run(const std::string& id, int n) {
    RunWriter w(db());
    RunInfo info;
    info.id = id;
    info.name = "synthetic";
    w.begin_run(info);
    for (int step = 0; step < n; ++step)
      w.sample("train/loss", step, step * 1.0, 1.0 / (step + 1));
    w.finish(RunStatus::finished);
  }
  fs::path m_dir;
};

TEST_F(CliDurability, ExportToAFullDiskFailsWithTheFileNamed) {
  make_run("r1", 2000);
  for (const char* format : {"csv", "json"}) {
    const CmdResult r = run_sh("LATHE_CLI --db " + db() + " export r1 --format " + format + " -o /dev/full");
    EXPECT_NE(r.code, 0) << format << ": " << r.out;
    EXPECT_NE(r.out.find("writing /dev/full: No space left on device"), std::string::npos) << format << ": " << r.out;
    EXPECT_EQ(r.out.find("exported"), std::string::npos) << r.out;
  }
  // ... and a small export (everything fits in the buffer) fails the same way at close.
  make_run("tiny", 3);
  const CmdResult small = run_sh("LATHE_CLI --db " + db() + " export tiny --format json -o /dev/full");
  EXPECT_NE(small.code, 0) << small.out;
  EXPECT_NE(small.out.find("writing /dev/full: No space left on device"), std::string::npos) << small.out;
}

TEST_F(CliDurability, ExportPastAFileSizeLimitRemovesThePartialFile) {
  make_run("r1", 2000);  // ~80 KB of CSV
  const std::string out = file("out.csv");
  // ulimit -f counts KiB; SIGXFSZ ignored, so the writes fail with EFBIG (as a full disk would).
  const CmdResult r = run_sh("trap \"\" XFSZ; ulimit -f 64; exec LATHE_CLI --db " + db() + " export r1 -o " + out);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("writing " + out + ": File too large"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));  // no half CSV left looking like an export
  const CmdResult ok = run_sh("LATHE_CLI --db " + db() + " export r1 -o " + out);
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("exported 2000 samples"), std::string::npos) << ok.out;
}

TEST_F(CliDurability, IncompleteRunIsFlaggedAndRepairRestoresEverySample) {
  const std::string jsonl = file("metrics.jsonl");
  {  // a run whose queue overflowed while another process held the store: the store is behind
    WriterOptions o;
    o.commit_interval_ms = 10;
    o.max_queued_rows = 50;
    o.open.busy_timeout_ms = 50;
    JsonlSink sink(jsonl);
    RunWriter w(db(), o);
    FanoutSink sinks;
    sinks.add(&sink);
    sinks.add(&w);
    RunInfo info;
    info.id = "inc";
    info.name = "locked";
    w.begin_run(info);
    sinks.event("started", {{"metrics_file", jsonl}});
    {
      sql::Db other(db(), 1000);
      other.exec("BEGIN EXCLUSIVE");
      for (int step = 0; step < 300; ++step) {
        sinks.sample("train/loss", step, step * 1.0, 1.0 / (step + 1));
        if (step % 20 == 0)
          std::this_thread::sleep_for(10ms);
      }
      other.exec("COMMIT");
    }
    sinks.event("finished", {{"steps", 300}});
    ASSERT_EQ(w.finish(RunStatus::finished), RunStatus::incomplete);
  }
  const CmdResult list = run_sh("LATHE_CLI --db " + db() + " list");
  EXPECT_EQ(list.code, 0) << list.out;
  EXPECT_NE(list.out.find("incomplete"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("lathe-cli repair inc"), std::string::npos) << list.out;
  const CmdResult show = run_sh("LATHE_CLI --db " + db() + " show inc");
  EXPECT_NE(show.out.find("[incomplete]"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("lathe-cli repair inc"), std::string::npos) << show.out;

  const CmdResult rep = run_sh("LATHE_CLI --db " + db() + " repair inc --json");
  ASSERT_EQ(rep.code, 0) << rep.out;
  const auto j = nlohmann::json::parse(rep.out);
  EXPECT_EQ(j["samples_in_file"], 300);
  EXPECT_GT(j["reimported"].get<int>(), 0);
  EXPECT_EQ(j["status_before"], "incomplete");
  EXPECT_EQ(j["status_after"], "finished");

  const auto shown = nlohmann::json::parse(run_sh("LATHE_CLI --db " + db() + " show inc --json").out);
  EXPECT_EQ(shown["status"], "finished");
  EXPECT_EQ(shown["metrics"]["train/loss"]["count"], 300);
  const CmdResult again = run_sh("LATHE_CLI --db " + db() + " repair inc");
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("re-imported 0 of 300 samples"), std::string::npos) << again.out;
  const CmdResult csv = run_sh("LATHE_CLI --db " + db() + " export inc | wc -l");
  EXPECT_NE(csv.out.find("301"), std::string::npos) << csv.out;  // header + every sample
}

TEST_F(CliDurability, RepairOfAnUnknownRunIsADataError) {
  make_run("r1", 3);
  const CmdResult r = run_sh("LATHE_CLI --db " + db() + " repair nosuchrun");
  EXPECT_EQ(r.code, 2) << r.out;
  const CmdResult nofile = run_sh("LATHE_CLI --db " + db() + " repair r1");
  EXPECT_EQ(nofile.code, 2) << nofile.out;
  EXPECT_NE(nofile.out.find("--from"), std::string::npos) << nofile.out;
}

// The acceptance bench in short (bench/kill_under_lock.py): 2 kills of a real run under 3 s locks.
TEST_F(CliDurability, KillUnderLockLosesNoSample) {
  if (!fs::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  fs::path script = fs::path(__FILE__).parent_path() / ".." / ".." / "bench" / "kill_under_lock.py";
  if (script.is_relative())  // __FILE__ as the compiler saw it, from the build folder
    script = fs::path(LATHE_TEST_BINARY_DIR) / script;
  ASSERT_TRUE(fs::exists(script)) << script;
  const CmdResult r = run_sh("python3 " + script.string() + " --cli LATHE_CLI --kills 2 --lock-s 3 --gap-s 0.5" +
                             " --max-kill-s 3 --train-subset 2048 --seed 3");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("summary: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("STILL MISSING"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(0 runs with samples)"), std::string::npos) << r.out;  // the check checked something
}

}  // namespace
}  // namespace lathe
