// lathe-cli sweep --slurm against a real Slurm (tests/support/local_slurm.h, started by the test):
// a 6-run sweep submitted as a job array finishes, each task writing its own store in the shared
// folder; imports while it runs bring runs in live, the final import has every run and sample of
// the task stores, and a second import adds nothing. A second sweep is cancelled (scancel).
// Skips with the reason when the daemons cannot start here.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/data/dataset.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/local_slurm.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::CmdResult;
using test::run_shell;

class CliSlurm : public test::Cli {};

int64_t total_samples_in(const fs::path& folder) {
  int64_t n = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(folder))
    if (e.path().extension() == ".db")
      n += sql::Db(e.path().string()).query_int("SELECT count(*) FROM samples").value_or(0);
  return n;
}

TEST_F(CliSlurm, SixRunSweepOnALocalSlurmIsImportedOnce) {
  if (!fs::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  test::LocalSlurm slurm(m_dir / "slurm");
  if (!slurm.ok())
    GTEST_SKIP() << "no local Slurm: " << slurm.reason();

  write("tiny.json", R"({"name": "tiny", "model": {"zoo": "student"}, "train": {"epochs": 1, "threads": 1},
                         "data": {"train_subset": 256, "test_subset": 100}})");
  const std::string def =
      write("sweep.json", R"({"name": "slurm-sweep", "base": "tiny.json", "grid": {"seed": [1, 2, 3, 4, 5, 6]}})");
  const fs::path shared = m_dir / "shared";
  const std::string cli = slurm.env() + test::cli_binary() + " --db " + db() + " ";
  CmdResult r = run_shell(cli + "sweep " + def + " --slurm --out " + shared.string() +
                          " --cpus 1 --time 10:00 --json --set output.dir=runs");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json sub = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"")));
  const std::string job = sub["slurm_job"], sweep_id = sub["sweep"];
  EXPECT_EQ(sub["tasks"], 6);
  EXPECT_TRUE(fs::exists(shared / "sweep.sbatch"));
  EXPECT_NE(test::run_shell("cat " + (shared / "sweep.sbatch").string()).out.find("#SBATCH --array=0-5"),
            std::string::npos);

  // Import while the job runs, as the GUI does on a timer.
  int live_imports_with_runs = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(400);
  while (!slurm.job_done(job) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    r = run_shell(cli + "import " + shared.string() + " --json");
    ASSERT_EQ(r.code, 0) << r.out;
    if (nlohmann::json::parse(r.out)["runs_added"].get<int>() > 0 && !slurm.job_done(job))
      ++live_imports_with_runs;
  }
  ASSERT_TRUE(slurm.job_done(job)) << "the job did not finish in 400 s";
  r = run_shell(cli + "import " + shared.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(live_imports_with_runs, 0) << "no run arrived while the job ran";

  {
    Store s = Store::open(db());
    const std::vector<SweepMemberRecord> members = sweep_members(s, sweep_id);
    ASSERT_EQ(members.size(), 6u);
    for (const SweepMemberRecord& m : members)
      EXPECT_EQ(m.state, MemberState::finished) << m.index << " " << m.run_id;
    EXPECT_EQ(find_sweep(s, sweep_id).finished, 6);
    EXPECT_EQ(s.db().query_int("SELECT count(*) FROM samples"), total_samples_in(shared / "stores"));
  }
  r = run_shell(cli + "import " + shared.string() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json again = nlohmann::json::parse(r.out);
  EXPECT_EQ(again["files"], 6);
  EXPECT_EQ(again["runs_added"], 0);
  EXPECT_EQ(again["runs_updated"], 0);
  EXPECT_EQ(again["samples_added"], 0);
  EXPECT_EQ(again["events_added"], 0);

  // Cancel: a second sweep's job is gone from the queue after `sweep --cancel`.
  r = run_shell(cli + "sweep " + def + " --slurm --out " + (m_dir / "shared2").string() +
                " --cpus 1 --json --set output.dir=runs --set train.epochs=50");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json sub2 = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"")));
  r = run_shell(cli + "sweep --cancel " + sub2["sweep"].get<std::string>());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!slurm.job_done(sub2["slurm_job"]) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(slurm.job_done(sub2["slurm_job"]));
  EXPECT_EQ(find_sweep(Store::open(db()), sub2["sweep"]).status, "cancelled");
}

}  // namespace
}  // namespace lathe
