// lathe-cli sweep and import, end to end with real (tiny) runs: a 4-run sweep killed with SIGKILL
// mid-way and resumed runs only what did not finish and ends with every member finished; a bad
// definition exits 2 naming the field; importing a folder of per-run stores twice adds runs and
// samples the first time and nothing the second.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "engine/data/dataset.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/fashion_mnist.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::CmdResult;
using test::run_cmd;

using test::have_fashion_mnist;

class CliSweep : public test::Cli {
 protected:
  std::string tiny_base() {
    return write("tiny.json", R"({"name": "tiny", "model": {"zoo": "student"}, "train": {"epochs": 1, "threads": 1},
                                  "data": {"train_subset": 256, "test_subset": 100}})");
  }
  /// Store counts read while other processes write it (no reaping, no migration).
  SweepRecord progress(const std::string& sweep_id) {
    Store::OpenOptions o;
    o.reap_stale = false;
    return find_sweep(Store::open(db(), o), sweep_id);
  }
};

/// Starts lathe-cli with `args` in the background, its output to `log`.
pid_t start_cli(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    (void)f;
    ::dup2(1, 2);
    std::vector<char*> argv;
    std::string exe = test::cli_binary();
    argv.push_back(exe.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(CliSweep, KilledMidwayAndResumedToCompletion) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  // Runs of several seconds each even on an idle machine (~1 s with 2,048 images was shorter than
  // the poll could see reliably), so the kill lands while one runs.
  write("small.json", R"({"name": "tiny", "model": {"zoo": "student"}, "train": {"epochs": 2, "threads": 1},
                          "data": {"train_subset": 16384, "test_subset": 100}})");
  const std::string def =
      write("sweep.json", R"({"name": "tiny-sweep", "base": "small.json",
                              "grid": {"train.optimizer.lr": [0.01, 0.02]}, "repeat_seeds": 2})");
  const std::string log = (m_dir / "sweep.log").string();
  const pid_t pid = start_cli({"--db", db(), "sweep", def, "--jobs", "1", "--set", "output.dir=" + (m_dir / "runs").string()},
                              log);
  ASSERT_GT(pid, 0);

  // Wait for the sweep to exist and one or two members finished, then kill -9 it. The deadline only
  // bounds a hang: on a loaded machine a member can take minutes.
  std::string sweep_id;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  bool midway = false;
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!fs::exists(db()))
      continue;
    try {
      Store::OpenOptions o;
      o.reap_stale = false;
      Store s = Store::open(db(), o);
      const std::vector<SweepRecord> sweeps = list_sweeps(s);
      if (sweeps.empty())
        continue;
      sweep_id = sweeps[0].id;
      // Between members (one finished, the next not started yet) is as much "midway" as during one:
      // either way the resume must run what is left and keep what finished.
      if (sweeps[0].finished >= 1 && sweeps[0].finished <= 2) {
        midway = true;
        break;
      }
      if (sweeps[0].total > 0 && sweeps[0].finished == sweeps[0].total) {
        last_error = "every member finished before the poll saw the sweep midway";
        break;  // past the window: fail now instead of polling until the deadline
      }
    } catch (const std::exception& e) {
      last_error = e.what();  // the file is being created
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(midway) << last_error << "\n" << read_file(log);

  // The running member is told to stop when its parent dies (PR_SET_PDEATHSIG): wait for its run to end.
  const auto deadline2 = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline2 && progress(sweep_id).running > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const SweepRecord killed = progress(sweep_id);
  ASSERT_EQ(killed.total, 4);
  ASSERT_EQ(killed.running, 0);
  ASSERT_LT(killed.finished, 4) << "the kill came too late to test a resume";
  std::map<int, std::string> finished_before;
  {
    Store::OpenOptions o;
    o.reap_stale = false;
    Store s = Store::open(db(), o);
    for (const SweepMemberRecord& m : sweep_members(s, sweep_id))
      if (m.state == MemberState::finished)
        finished_before[m.index] = m.run_id;
  }
  ASSERT_EQ(static_cast<int>(finished_before.size()), killed.finished);

  const CmdResult r = run_cmd("--db " + db() + " sweep --resume " + sweep_id + " --jobs 2");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(std::to_string(4 - killed.finished) + " of 4 runs to go"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4/4 runs finished"), std::string::npos) << r.out;

  Store s = Store::open(db());
  const std::vector<SweepMemberRecord> members = sweep_members(s, sweep_id);
  ASSERT_EQ(members.size(), 4u);
  std::vector<double> seeds;
  for (const SweepMemberRecord& m : members) {
    EXPECT_EQ(m.state, MemberState::finished) << m.index;
    if (finished_before.count(m.index))
      EXPECT_EQ(m.run_id, finished_before[m.index]) << "a finished member ran again";
    const nlohmann::json cfg = nlohmann::json::parse(s.run(m.run_id).config_json);
    EXPECT_EQ(cfg["name"], m.name);
    seeds.push_back(cfg["seed"].get<double>());
  }
  EXPECT_EQ(seeds, (std::vector<double>{0, 1, 0, 1}));
  EXPECT_EQ(find_sweep(s, sweep_id).status, "finished");
  const nlohmann::json list = nlohmann::json::parse(run_cmd("--db " + db() + " sweep --list --json").out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["finished"], 4);
  EXPECT_EQ(list[0]["total"], 4);

  // `lathe-cli list --sweep` keeps to the sweep's runs (by name or id), beside a run of no sweep.
  const CmdResult other = run_cmd("--db " + db() + " run " + (m_dir / "small.json").string() +
                                  " --set name=outside --set data.train_subset=256 --set train.epochs=1 --set output.dir=" +
                                  (m_dir / "runs").string());
  ASSERT_EQ(other.code, 0) << other.out;
  const auto total_of = [&](const std::string& args) {
    const CmdResult r = run_cmd("--db " + db() + " list --json --limit 0" + args);
    EXPECT_EQ(r.code, 0) << r.out;
    return nlohmann::json::parse(r.out)["total"].get<int>();
  };
  EXPECT_EQ(total_of(""), 5);
  EXPECT_EQ(total_of(" --sweep tiny-sweep"), 4);
  EXPECT_EQ(total_of(" --sweep " + sweep_id), 4);
  const CmdResult none = run_cmd("--db " + db() + " list --sweep no-such-sweep");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("no sweep matches \"no-such-sweep\""), std::string::npos) << none.out;
}

TEST_F(CliSweep, MalformedDefinitionExitsTwoNamingTheField) {
  tiny_base();
  const std::string def = write("bad.json", R"({"base": "tiny.json", "random": {"train.optimizer.lr":
                                                 {"log_uniform": [-1, 0.1]}}, "trials": 3})");
  const CmdResult r = run_cmd("--db " + db() + " sweep " + def);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("sweep.random.train.optimizer.lr.log_uniform"), std::string::npos) << r.out;
  EXPECT_FALSE(store_written()) << "nothing is stored for a refused definition";
  const CmdResult dry = run_cmd("--db " + db() + " sweep " +
                                write("ok.json", R"({"base": "tiny.json", "grid": {"seed": [1, 2, 3]}})") +
                                " --dry-run");
  EXPECT_EQ(dry.code, 0) << dry.out;
  EXPECT_NE(dry.out.find("2  tiny seed=3  --set seed=3"), std::string::npos) << dry.out;
}

int64_t count_rows(const std::string& db, const std::string& sql) {
  sql::Db d(db);
  return d.query_int(sql).value_or(-1);
}

TEST_F(CliSweep, ImportTwiceImportsNothingTheSecondTime) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = tiny_base();
  fs::create_directories(m_dir / "shared" / "stores");
  int64_t source_samples = 0;
  for (const char* name : {"a", "b"}) {
    const std::string store = (m_dir / "shared" / "stores" / (std::string(name) + ".db")).string();
    const CmdResult r = run_cmd("--db " + store + " run " + cfg + " --set output.dir=" + (m_dir / "runs").string() +
                                " --set seed=" + (name[0] == 'a' ? "1" : "2"));
    ASSERT_EQ(r.code, 0) << r.out;
    source_samples += count_rows(store, "SELECT count(*) FROM samples");
  }
  ASSERT_GT(source_samples, 0);
  CmdResult r = run_cmd("--db " + db() + " import " + (m_dir / "shared").string() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["files"], 2);
  EXPECT_EQ(j["runs_added"], 2);
  EXPECT_EQ(j["samples_added"], source_samples);
  EXPECT_GT(j["events_added"].get<int>(), 0);
  r = run_cmd("--db " + db() + " import " + (m_dir / "shared").string() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs_added"], 0);
  EXPECT_EQ(j["runs_updated"], 0);
  EXPECT_EQ(j["samples_added"], 0);
  EXPECT_EQ(j["events_added"], 0);
  EXPECT_EQ(count_rows(db(), "SELECT count(*) FROM samples"), source_samples);

  // The imported runs read like the originals: same summaries.
  Store dst = Store::open(db(), Store::read_only_options());
  Store src = Store::open((m_dir / "shared" / "stores" / "a.db").string(), Store::read_only_options());
  const std::string id = src.list_runs().runs.at(0).run.id;
  EXPECT_EQ(dst.run(id).status, RunStatus::finished);
  const std::vector<MetricSummary> a = src.summaries(id), b = dst.summaries(id);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].metric, b[i].metric);
    EXPECT_EQ(a[i].count, b[i].count) << a[i].metric;
    EXPECT_EQ(a[i].last_step, b[i].last_step) << a[i].metric;
  }
  EXPECT_EQ(dst.params(id), src.params(id));
  EXPECT_EQ(dst.events(id).size(), src.events(id).size());
  r = run_cmd("--db " + db() + " import " + (m_dir / "nope").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lathe
