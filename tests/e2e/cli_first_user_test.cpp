// lathe-cli as a first-time user drives it (the CLI audit): a mistyped command, a --db path with a
// typo, a folder or a file that is no store given as --db, a store this user may not write, a bad
// --jobs, an empty output.dir, a --group-by or --param key no run has, -o naming a folder, Ctrl-C
// in the middle of a report, a run or a sweep, and repeated resumes of a data-parallel run. Each must end
// with exit status 2 and a message naming the argument and what is allowed, leave nothing behind
// (no store made by a reading command, no temporary file), or tell the user what to do next.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/core/error.h"
#include "engine/store/store.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/fashion_mnist.h"

namespace lathe::first_user_test {
namespace {

namespace fs = std::filesystem;
using test::CmdResult;
using test::run_cmd;
using test::run_shell;

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class CliFirstUser : public test::Cli {
 protected:
  /// lathe-cli `args` started in the background, its output in `log`.
  pid_t start(const std::string& args, const fs::path& log) {
    const std::string cmd = "exec " + test::cli_binary() + " " + args + " > " + log.string() + " 2>&1";
    const pid_t pid = fork();
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);  // a shell's background job would ignore it
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  /// The wait status of `pid` (killed after `limit_s`).
  int wait_for(pid_t pid, double limit_s) {
    const double end = seconds_now() + limit_s;
    int st = 0;
    while (seconds_now() < end) {
      if (waitpid(pid, &st, WNOHANG) == pid)
        return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    ADD_FAILURE() << "still running after " << limit_s << " s";
    return st;
  }
  static std::string read(const fs::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  /// Two runs in the store made through the store's own API (no training): seed 1 and 2.
  void two_stored_runs() {
    Store store = Store::open(db());
    for (int seed : {1, 2}) {
      RunInfo info;
      info.name = "stored";
      info.config = {{"seed", seed}, {"train", {{"epochs", 1}, {"optimizer", {{"lr", 0.1}}}}}};
      store.create_run(info, RunStatus::finished);
    }
  }
  /// A tiny config every run here shares.
  std::string tiny_config() {
    return write("tiny.json", R"({"model": {"zoo": "mlp"}, "train": {"epochs": 1},
                                  "data": {"train_subset": 2048, "test_subset": 256}})");
  }
};

// A run on this CPU priced at a GPU instance's rate: its summary says the dollars are a projection,
// and so does the started event the report and the live view read.
TEST_F(CliFirstUser, ACostPricedAtAGpuInstanceIsSaidToBeAProjection) {
  if (!test::have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const CmdResult r = run_cmd("--db " + db() + " run " + tiny_config() + " --set output.dir=" +
                              (m_dir / "runs").string() + " --set cost.instance=g4dn.xlarge");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(projected: timed on "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(CPU), priced at g4dn.xlarge's rate (1x NVIDIA T4 16GB)"), std::string::npos) << r.out;
  const CmdResult local = run_cmd("--db " + db() + " run " + tiny_config() + " --set output.dir=" +
                                  (m_dir / "runs").string());
  ASSERT_EQ(local.code, 0) << local.out;
  EXPECT_EQ(local.out.find("projected"), std::string::npos) << local.out;
}

TEST_F(CliFirstUser, AMistypedCommandIsNamedWithTheClosestOne) {
  const CmdResult r = run_cmd("--db " + db() + " lst");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown command 'lst' (did you mean 'list'?)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("commands: run, resume"), std::string::npos) << r.out;
  EXPECT_FALSE(store_written());
  EXPECT_EQ(run_cmd("--db " + db() + " prices").code, 0);  // a real command still runs
}

TEST_F(CliFirstUser, ReadingCommandsNeverCreateAStoreAtAMistypedPath) {
  const fs::path typo = m_dir / "no-such-folder" / "lathe.db";
  for (const std::string& cmd : {std::string("list"), std::string("show abc"), std::string("export abc"),
                                 std::string("compare a b"), std::string("sweep --list")}) {
    const CmdResult r = run_cmd("--db " + typo.string() + " " + cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("no store at " + typo.string()), std::string::npos) << cmd << "\n" << r.out;
  }
  EXPECT_FALSE(fs::exists(typo.parent_path()));  // before: list made the folder and an empty store
}

TEST_F(CliFirstUser, ATildeAfterDbEqualsIsTheHomeFolder) {
  fs::create_directories(m_dir / "home");
  fs::create_directories(m_dir / "cwd");
  const std::string cd = "cd " + (m_dir / "cwd").string() + " && HOME=" + (m_dir / "home").string() + " ";
  const CmdResult r = run_shell(cd + test::cli_binary() + " --db=~/lathe.db import " + (m_dir / "cwd").string());
  EXPECT_EQ(r.code, 0) << r.out;  // import creates the store it merges into
  EXPECT_TRUE(fs::exists(m_dir / "home" / "lathe.db")) << r.out;
  EXPECT_FALSE(fs::exists(m_dir / "cwd" / "~")) << r.out;  // before: a folder named "~" in the current one
}

TEST_F(CliFirstUser, RunRefusesAnUnusableStoreBeforeLoadingAnything) {
  const std::string cfg = tiny_config();
  const std::string not_sqlite = write("notes.db", "these are my notes\n");
  const std::string folder = (m_dir / "a-folder").string();
  fs::create_directories(folder);
  const struct {
    std::string db, expected;
  } cases[] = {
      {not_sqlite, "the file " + not_sqlite + " is not a lathe store"},
      {folder, "the store path " + folder + " is a folder; give --db a file (e.g. " + folder + "/lathe.db)"},
      {not_sqlite + "/x.db", "is not a folder"},
  };
  for (const auto& c : cases) {
    const CmdResult r = run_cmd("--db " + c.db + " run " + cfg + " --set output.dir=" + (m_dir / "runs").string());
    EXPECT_EQ(r.code, 2) << c.db << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("lathe: running"), std::string::npos) << r.out;  // refused before any work
    EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
    EXPECT_FALSE(runs_written()) << r.out;
  }
  EXPECT_EQ(read(not_sqlite), "these are my notes\n");
}

TEST_F(CliFirstUser, AStoreThisUserCannotWriteIsRefusedNamingIt) {
  if (geteuid() != 0 || run_shell("command -v setpriv").code != 0)
    GTEST_SKIP() << "needs root and setpriv to run lathe-cli as another user";
  two_stored_runs();
  // The store and its folder stay root's (0644 / 0755): user nobody may read them, not write.
  fs::permissions(m_dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
  const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups " + test::cli_binary() + " --db " + db();
  for (const std::string& cmd : {std::string("tag stored x"), std::string("note stored hi"),
                                 std::string("run " + tiny_config() + " --set output.dir=/tmp")}) {
    const CmdResult r = run_shell(as_nobody + " " + cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;  // before: 1, "SQLite error 1544 ... sqlite_util.cpp:109"
    EXPECT_NE(r.out.find("the store " + db() + " cannot be written by this user"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(".cpp"), std::string::npos) << r.out;
  }
  const CmdResult fresh = run_shell("setpriv --reuid=65534 --regid=65534 --clear-groups " + test::cli_binary() +
                                    " --db " + (m_dir / "new.db").string() + " run " + tiny_config());
  EXPECT_EQ(fresh.code, 2) << fresh.out;
  EXPECT_NE(fresh.out.find("is not writable by this user"), std::string::npos) << fresh.out;
}

TEST_F(CliFirstUser, BadSweepJobsAreRefusedBeforeTheSweepIsStored) {
  const std::string def = write("sweep.json", R"({"name": "s", "config": {"train": {"epochs": 1}},
                                                  "grid": {"train.optimizer.lr": [0.01, 0.1]}})");
  for (const char* jobs : {"0", "-3"}) {
    const CmdResult r = run_cmd("--db " + db() + " sweep " + def + " --jobs " + jobs);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(std::string("--jobs ") + jobs + ": allowed: 1 or more runs at a time"), std::string::npos)
        << r.out;
    EXPECT_FALSE(store_written()) << r.out;  // before: a pending sweep of 2 runs was left in the store
  }
}

TEST_F(CliFirstUser, AnExperimentConfigGivenToSweepIsNamedAsSuch) {
  const CmdResult r = run_cmd("--db " + db() + " sweep " + std::string(LATHE_SOURCE_DIR) + "/experiments/mlp.json");
  EXPECT_EQ(r.code, 2) << r.out;  // before: "sweep.compute: unknown key; allowed: name, base, ..."
  EXPECT_NE(r.out.find("this is an experiment config, not a sweep definition"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"base\": \"FILE.json\""), std::string::npos) << r.out;
  EXPECT_FALSE(store_written());
}

TEST_F(CliFirstUser, CompareOfOneRunNamedTwiceIsRefused) {
  two_stored_runs();
  const std::string id = nlohmann::json::parse(run_cmd("--db " + db() + " list --json").out)["runs"][0]["id"];
  const CmdResult r = run_cmd("--db " + db() + " compare " + id + " " + id.substr(0, 20));
  EXPECT_EQ(r.code, 2) << r.out;  // before: exit 0, the run beside itself
  EXPECT_NE(r.out.find("compare: run " + id + " is given twice"), std::string::npos) << r.out;
}

TEST_F(CliFirstUser, AnEmptyOutputDirIsRefusedByValidate) {
  const CmdResult r = run_cmd("validate " + write("c.json", "{}") + " --set output.dir=");
  EXPECT_EQ(r.code, 2) << r.out;  // before: valid, then `run` failed "cannot create the runs folder : ..."
  EXPECT_NE(r.out.find("output.dir: \"\"; allowed: a folder path"), std::string::npos) << r.out;
}

TEST_F(CliFirstUser, GroupByAndParamKeysThatNoRunHasAreRefused) {
  two_stored_runs();
  const CmdResult group = run_cmd("--db " + db() + " compare --group-by train.epoch");
  EXPECT_EQ(group.code, 2) << group.out;  // before: exit 0, every run in one group "all runs"
  EXPECT_NE(group.out.find("--group-by train.epoch: no config key of that name in any of the 2 runs; did you mean "
                           "train.epochs?"),
            std::string::npos)
      << group.out;
  const CmdResult without = run_cmd("--db " + db() + " compare --group-by -sed");
  EXPECT_EQ(without.code, 2) << without.out;
  EXPECT_NE(without.out.find("did you mean seed?"), std::string::npos) << without.out;
  EXPECT_EQ(run_cmd("--db " + db() + " compare --group-by train.epochs").code, 0);
  const CmdResult param = run_cmd("--db " + db() + " list --param train.epoch=1");
  EXPECT_EQ(param.code, 2) << param.out;  // before: exit 0, "0 of 0 run(s)"
  EXPECT_NE(param.out.find("--param train.epoch: no config key of that name"), std::string::npos) << param.out;
  const CmdResult none = run_cmd("--db " + db() + " list --json --param train.epochs=7");
  EXPECT_EQ(none.code, 0) << none.out;  // a known key with no run at that value is just an empty list
  EXPECT_EQ(nlohmann::json::parse(none.out)["total"], 0);
}

TEST_F(CliFirstUser, UnicodeNamesKeepTheRunTableAligned) {
  {
    Store store = Store::open(db());
    for (const char* name : {"\u540d\u524d", "abcd"}) {  // 名前: 6 bytes, 4 columns; abcd: 4 and 4
      RunInfo info;
      info.name = name;
      info.config = {{"seed", 1}};
      store.create_run(info, RunStatus::finished);
    }
  }
  const CmdResult r = run_cmd("--db " + db() + " list");
  ASSERT_EQ(r.code, 0) << r.out;
  auto gap_after = [&](const std::string& name) {  // the spaces between the name and its status
    const size_t at = r.out.find(name + " ");
    return at == std::string::npos ? std::string::npos : r.out.find("finished", at) - at - name.size();
  };
  EXPECT_NE(gap_after("abcd"), std::string::npos) << r.out;
  EXPECT_EQ(gap_after("\u540d\u524d"), gap_after("abcd")) << r.out;  // before: padded by bytes, 2 vs 4
}

TEST_F(CliFirstUser, ExportToAFolderOrIntoAMissingFolderIsRefused) {
  two_stored_runs();
  fs::create_directories(m_dir / "out");
  const struct {
    std::string cmd, expected;
  } cases[] = {
      {"export stored -o " + (m_dir / "out").string(), ": it is a folder; give a file name"},
      {"export 2 -o " + (m_dir / "missing" / "x.csv").string(), ": the folder " + (m_dir / "missing").string() +
                                                                   " does not exist"},
      {"export-model 2 -o " + (m_dir / "out").string(), ": it is a folder; give a file name"},
  };
  for (const auto& c : cases) {
    const CmdResult r = run_cmd("--db " + db() + " " + c.cmd);
    EXPECT_EQ(r.code, 2) << c.cmd << "\n" << r.out;  // before: 1, "opening for writing ...: Is a directory"
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.cmd << "\n" << r.out;
  }
  // A good export replaces an older file whole, through a temporary file that is gone afterwards.
  const std::string old = write("out/samples.csv", "old\n");
  const std::string ids = nlohmann::json::parse(run_cmd("--db " + db() + " list --json").out)["runs"][0]["id"];
  const CmdResult ok = run_cmd("--db " + db() + " export " + ids + " -o " + old);
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(read(old), "run,metric,step,wall_ms,value\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(m_dir / "out"), fs::directory_iterator()), 1);
}

TEST_F(CliFirstUser, CtrlCDuringAReportLeavesNoTemporaryFile) {
  if (!test::have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  if (run_cmd("--db " + db() + " report x -o " + (m_dir / "probe.pdf").string()).out.find("needs the Qt build") !=
      std::string::npos)
    GTEST_SKIP() << "lathe-cli built without the report (Qt)";
  std::string ids;
  for (int seed : {1, 2, 3}) {
    const CmdResult r = run_cmd("--db " + db() + " run " + tiny_config() + " --set seed=" + std::to_string(seed) +
                                " --set output.dir=" + (m_dir / "runs").string());
    ASSERT_EQ(r.code, 0) << r.out;
  }
  const nlohmann::json list = nlohmann::json::parse(run_cmd("--db " + db() + " list --json").out);
  for (const auto& run : list["runs"])
    ids += " " + run["id"].get<std::string>();
  fs::create_directories(m_dir / "reports");
  const fs::path pdf = m_dir / "reports" / "report.pdf";
  const pid_t pid = start("--db " + db() + " report" + ids + " -o " + pdf.string(), m_dir / "report.log");
  // The moment its temporary file is there, the report is under way: interrupt it then.
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {
    for (const auto& e : fs::directory_iterator(m_dir / "reports"))
      seen = seen || e.path().filename().string().rfind(".report.pdf.tmp-", 0) == 0;
    if (!seen)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(seen) << read(m_dir / "report.log");
  kill(pid, SIGINT);
  const int st = wait_for(pid, 30);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) << st << " " << read(m_dir / "report.log");
  EXPECT_TRUE(fs::is_empty(m_dir / "reports"));  // before: .report.pdf.tmp-<pid> was left behind
}

TEST_F(CliFirstUser, ACancelledRunSaysHowToContinueAndPrintsNoNan) {
  if (!test::have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("long.json", R"({"model": {"zoo": "mlp"}, "train": {"epochs": 50},
                                                 "data": {"train_subset": 4096, "test_subset": 256}})");
  const pid_t pid = start("--db " + db() + " run " + cfg + " --set output.dir=" + (m_dir / "runs").string(),
                          m_dir / "run.log");
  for (int i = 0; i < 1500 && !runs_written(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(runs_written()) << read(m_dir / "run.log");
  kill(pid, SIGINT);
  const int st = wait_for(pid, 60);
  const std::string out = read(m_dir / "run.log");
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 130) << out;
  const std::string id = fs::path(test::only_subfolder(m_dir / "runs")).filename().string();
  EXPECT_NE(out.find("continue it with `lathe-cli --db " + db() + " resume " + id + "`"), std::string::npos) << out;
  EXPECT_EQ(out.find("nan"), std::string::npos) << out;  // before: "test accuracy nan%  test loss nan"
}

TEST_F(CliFirstUser, CtrlCOfASweepThenResumeContinuesTheStoppedMemberFromItsCheckpoint) {
  if (!test::have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string def = write("sweep.json", R"({"name": "long", "grid": {"seed": [7]},
      "config": {"model": {"zoo": "mlp"}, "train": {"epochs": 30},
                 "data": {"train_subset": 4096, "test_subset": 256}}})");
  const pid_t pid = start("--db " + db() + " sweep " + def + " --set output.dir=" + (m_dir / "runs").string(),
                          m_dir / "sweep.log");
  std::string run_id;
  for (int i = 0; i < 3000 && run_id.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    try {
      Store store = Store::open(db(), Store::read_only_options());
      const RunPage page = store.list_runs();
      if (!page.runs.empty() && page.runs[0].run.status == RunStatus::running)
        for (const EventRecord& e : store.events(page.runs[0].run.id))
          if (e.kind == "started")
            run_id = page.runs[0].run.id;
    } catch (const DataError&) {  // not there yet
    }
  }
  ASSERT_FALSE(run_id.empty()) << read(m_dir / "sweep.log");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // some steps in
  kill(pid, SIGINT);
  const int st = wait_for(pid, 60);
  ASSERT_TRUE(WIFEXITED(st)) << read(m_dir / "sweep.log");
  EXPECT_EQ(WEXITSTATUS(st), 130) << read(m_dir / "sweep.log");

  const CmdResult r = run_cmd("--db " + db() + " sweep --resume long");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("continues its run " + run_id + " from its newest checkpoint"), std::string::npos) << r.out;
  Store store = Store::open(db());
  const RunPage page = store.list_runs();
  ASSERT_EQ(page.runs.size(), 1u);  // before: a second run from step 0, the stopped one left cancelled
  EXPECT_EQ(page.runs[0].run.id, run_id);
  EXPECT_EQ(page.runs[0].run.status, RunStatus::finished);
  int64_t from_step = -1;
  for (const EventRecord& e : store.events(run_id))
    if (e.kind == "resumed")
      from_step = e.fields.value("from_step", int64_t{-1});
  EXPECT_GT(from_step, 0);  // the steps before the Ctrl-C were not trained again
}

/// The resume-* folders in a run's <id>.ranks folder.
int resume_folders(const fs::path& ranks_dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(ranks_dir))
    n += e.is_directory() && e.path().filename().string().rfind("resume-", 0) == 0;
  return n;
}

TEST_F(CliFirstUser, RepeatedResumesOfATwoRankRunKeepOneResumeFolder) {
  if (!test::have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("ranks.json", R"({"model": {"zoo": "mlp"}, "train": {"epochs": 40},
                                                  "data": {"train_subset": 2048, "test_subset": 256},
                                                  "compute": {"devices": 2, "timeout_s": 20}})");
  // Interrupts a started lathe-cli once its run is under way in the store: running, with `resumed`
  // events numbering `resumes` (a resume is under way once rank 0 has taken the run over).
  auto interrupt_when_training = [&](pid_t pid, int resumes) {
    for (int i = 0; i < 3000; ++i) {
      try {
        Store store = Store::open(db(), Store::read_only_options());
        const RunPage page = store.list_runs();
        if (!page.runs.empty() && page.runs[0].run.status == RunStatus::running) {
          int seen = 0;
          for (const EventRecord& e : store.events(page.runs[0].run.id))
            seen += e.kind == "resumed";
          if (seen >= resumes)
            break;
        }
      } catch (const DataError&) {  // not there yet, or rank 0 is creating it
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few steps in
    kill(pid, SIGINT);
    const int st = wait_for(pid, 60);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 130) << st << " " << read(m_dir / "log.txt");
  };
  interrupt_when_training(start("--db " + db() + " run " + cfg + " --set output.dir=" + (m_dir / "runs").string(),
                                m_dir / "log.txt"),
                          0);
  std::string run_dir;
  for (const auto& e : fs::directory_iterator(m_dir / "runs"))
    if (e.path().extension() != ".ranks")
      run_dir = e.path().string();
  ASSERT_FALSE(run_dir.empty());
  const std::string id = fs::path(run_dir).filename().string();
  const fs::path ranks_dir = m_dir / "runs" / (id + ".ranks");
  for (int resumes = 1; resumes <= 2; ++resumes) {
    interrupt_when_training(start("--db " + db() + " resume " + id, m_dir / "log.txt"), resumes);
    EXPECT_EQ(resume_folders(ranks_dir), 1) << "after resume " << resumes;  // before: 1, then 2
  }
  const CmdResult last = run_cmd("--db " + db() + " resume " + id);
  ASSERT_EQ(last.code, 0) << last.out;
  // Its time is the resumed process's, said as such (before: "finished run ID in 0:01").
  EXPECT_NE(last.out.find("in "), std::string::npos);
  EXPECT_NE(last.out.find(" (since its resume at step "), std::string::npos) << last.out;
  EXPECT_EQ(resume_folders(ranks_dir), 1);  // before: 3, one more per resume
  EXPECT_TRUE(fs::exists(ranks_dir / "rank1.log"));  // the first attempt's worker log stays
  for (const auto& e : fs::directory_iterator(ranks_dir))
    if (e.is_directory())
      EXPECT_TRUE(fs::exists(e.path() / "rank1.log")) << e.path();  // the newest resume's log
}

}  // namespace
}  // namespace lathe::first_user_test
