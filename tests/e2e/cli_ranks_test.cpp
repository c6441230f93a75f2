// Data-parallel `lathe-cli run` (compute.devices, app/cli_ranks.h) on the real binary: two ranks
// start, meet and finish with one run in the store; a worker killed or stopped, or rank 0 killed,
// ends every process within compute.timeout_s + 10 s with the run `failed` naming the rank; bad
// compute.* values are refused naming the field; two srun-like ranks started separately meet in a
// shared folder, and srun cannot resume a run whose ranks met in a folder on one machine. The
// process table is checked: no lathe-cli child of the test is left.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/store/store.h"
#include "tests/e2e/cli_test_util.h"

namespace lathe::test {
namespace {

constexpr double kTimeoutS = 5;  // compute.timeout_s of every run here

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

/// The pids whose parent is `parent` (from /proc/<pid>/stat), zombies left out.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    std::getline(f, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state != 'Z')
      out.push_back(std::stoi(name));
  }
  return out;
}

/// True while `pid` exists and is not a zombie.
bool alive(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line))
    return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && line[close + 2] != 'Z';
}

class CliRanks : public Cli {
 protected:
  /// Starts lathe-cli `args` (a shell fragment, output to out.txt) as a child of the test.
  pid_t start(const std::string& args, const std::string& env = "") {
    const std::string cmd = env + " exec " + cli_binary() + " " + args + " > " + (m_dir / "out.txt").string() + " 2>&1";
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  /// The exit code of `pid` within `limit_s` (-2 when it was still running: then it is killed).
  int wait_exit(pid_t pid, double limit_s) {
    const double end = now_s() + limit_s;
    int st = 0;
    while (now_s() < end) {
      if (waitpid(pid, &st, WNOHANG) == pid)
        return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -2;
  }
  /// The worker rank 0 (`pid`) started, once it is there.
  pid_t wait_worker(pid_t pid) {
    for (int i = 0; i < 200; ++i) {
      const std::vector<pid_t> c = children_of(pid);
      if (!c.empty())
        return c[0];
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }
  /// Waits until rank 0 has begun the run (its run folder exists: joined, set up, in the store).
  void wait_started() {
    for (int i = 0; i < 400; ++i) {
      if (std::filesystem::exists(m_dir / "runs"))
        for (const auto& e : std::filesystem::directory_iterator(m_dir / "runs"))
          if (e.path().extension() != ".ranks") {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a few steps in
            return;
          }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the run did not start: " << out();
  }
  std::string tiny(const std::string& extra = "") {
    const std::string cfg = write("tiny.json", R"({"model": {"zoo": "mlp"}, "train": {"epochs": 1},
                                                   "data": {"train_subset": 512, "test_subset": 256}})");
    return "run " + cfg + " " + out_dir() + " --set compute.timeout_s=" + std::to_string(kTimeoutS) + " " + extra;
  }
  /// A run long enough (several seconds) to hurt a rank during it.
  std::string longer() { return tiny("--set compute.devices=2 --set data.train_subset=2048 --set train.epochs=60"); }
  std::string out() const {
    std::ifstream f(m_dir / "out.txt");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  /// The store's only run: its status and the error its last status event recorded.
  std::pair<RunStatus, std::string> only_run() {
    Store store = Store::open(db());
    const RunPage page = store.list_runs();
    EXPECT_EQ(page.runs.size(), 1u);
    if (page.runs.empty())
      return {RunStatus::queued, ""};
    std::string error;
    for (const EventRecord& e : store.events(page.runs[0].run.id))
      if (e.fields.contains("error") && e.fields["error"].is_string())
        error = e.fields["error"].get<std::string>();
    return {page.runs[0].run.status, error};
  }
  /// Runs the long run, does `hurt` to the worker, and checks the run fails in time saying `expected`.
  void expect_fault(int sig, const std::string& expected) {
    const pid_t rank0 = start(longer());
    const pid_t worker = wait_worker(rank0);
    ASSERT_GT(worker, 0) << out();
    wait_started();
    ASSERT_EQ(kill(worker, sig), 0);
    const double t0 = now_s();
    EXPECT_EQ(wait_exit(rank0, kTimeoutS + 10), 1) << out();
    EXPECT_LT(now_s() - t0, kTimeoutS + 10);
    EXPECT_FALSE(alive(worker));
    EXPECT_TRUE(children_of(getpid()).empty());
    const auto [status, error] = only_run();
    EXPECT_EQ(status, RunStatus::failed);
    EXPECT_NE(error.find("rank 1 (pid " + std::to_string(worker) + ") " + expected), std::string::npos) << error;
    EXPECT_NE(error.find(".ranks/rank1.log"), std::string::npos) << error;  // where to look: the worker's output
    EXPECT_NE(out().find("rank 1 (pid " + std::to_string(worker) + ") " + expected), std::string::npos) << out();
  }
};

TEST_F(CliRanks, TwoRanksFinishWithOneRunInTheStore) {
  const CmdResult r = run_cmd(tiny("--set compute.devices=2"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("as rank 0 of 2"), std::string::npos) << r.out;
  EXPECT_EQ(only_run().first, RunStatus::finished);
  // The worker ran and finished too, its output in the log next to the run.
  int logs = 0;
  for (const auto& e : std::filesystem::directory_iterator(m_dir / "runs"))
    if (std::filesystem::exists(e.path() / "rank1.log")) {
      std::ifstream f(e.path() / "rank1.log");
      const std::string log(std::istreambuf_iterator<char>(f), {});
      EXPECT_NE(log.find("as rank 1 of 2"), std::string::npos) << log;
      EXPECT_NE(log.find("finished run"), std::string::npos) << log;
      ++logs;
    }
  EXPECT_EQ(logs, 1);
  EXPECT_TRUE(children_of(getpid()).empty());
  // dist/world_size = 2 is logged once the engine trains on RunOptions::comm (dp15's branch).
}

TEST_F(CliRanks, KilledWorkerFailsTheRunNamingIt) { expect_fault(SIGKILL, "was killed by signal 9 (SIGKILL)"); }

TEST_F(CliRanks, StoppedWorkerFailsTheRunAfterTheTimeout) { expect_fault(SIGSTOP, "stopped answering for"); }

TEST_F(CliRanks, WorkersExitWhenRankZeroIsKilled) {
  const pid_t rank0 = start(longer());
  const pid_t worker = wait_worker(rank0);
  ASSERT_GT(worker, 0) << out();
  wait_started();
  kill(rank0, SIGKILL);
  EXPECT_EQ(wait_exit(rank0, 5), -SIGKILL);
  const double end = now_s() + kTimeoutS + 10;
  while (alive(worker) && now_s() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(alive(worker));
}

TEST_F(CliRanks, SigtermStopsEveryRank) {
  const pid_t rank0 = start(longer());
  const pid_t worker = wait_worker(rank0);
  ASSERT_GT(worker, 0) << out();
  wait_started();
  kill(rank0, SIGTERM);
  EXPECT_EQ(wait_exit(rank0, kTimeoutS + 10), 130) << out();
  EXPECT_FALSE(alive(worker));
  EXPECT_EQ(only_run().first, RunStatus::cancelled);
}

TEST_F(CliRanks, BadComputeValuesAreRefusedNamingTheField) {
  for (const char* bad : {"compute.devices=0", "compute.devices=65", "compute.timeout_s=0", "compute.bucket_mb=-1"}) {
    const CmdResult r = run_cmd(tiny(std::string("--set ") + bad));
    EXPECT_EQ(r.code, 2) << bad << r.out;
    EXPECT_NE(r.out.find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos) << r.out;
  }
  // The launcher's world size wins; devices must be 1 or equal, naming both.
  CmdResult r = run_cmd(tiny("--set compute.devices=3 --rank 0 --world-size 2 --rendezvous-id x"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("compute.devices: 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("world of 2"), std::string::npos) << r.out;
  // srun's ranks may be on several machines: the default (local) rendezvous folder is refused.
  r = run_shell("SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_JOB_ID=7 " + cli_binary() + " " + tiny());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("compute.rendezvous"), std::string::npos) << r.out;
  // The spot simulation restarts the ranks lathe-cli starts on one machine, not a launcher's.
  r = run_cmd(tiny("--set cost.interruptions_per_hour=1 --rank 0 --world-size 2 --rendezvous-id x"));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cost.interruptions_per_hour: 1, but --rank/--world-size started this rank (0 of 2)"),
            std::string::npos)
      << r.out;
  r = run_shell("SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_STEP_ID=0 SLURM_JOB_ID=7 " + cli_binary() + " " +
                tiny("--set cost.interruptions_per_hour=1 --set compute.rendezvous=" + (m_dir / "rdv").string()));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("cost.interruptions_per_hour: 1, but slurm started this rank (1 of 2)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(store_written());
}

TEST_F(CliRanks, ASlurmBatchScriptWithoutSrunRunsAsOneProcessAndSaysSo) {
  // sbatch --ntasks=2 running lathe-cli itself (no srun): Slurm's batch-step variables, no step id.
  // Not rank 0 of 2 (no rank 1 would ever come): one process, with a note on what to do instead.
  const CmdResult r =
      run_shell("SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=2 SLURM_JOB_ID=7 " + cli_binary() + " " + tiny());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("SLURM_NTASKS=2 without SLURM_STEP_ID"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("srun lathe-cli run"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("as rank 0 of 2"), std::string::npos) << r.out;
  EXPECT_EQ(only_run().first, RunStatus::finished);
}

TEST_F(CliRanks, SrunRanksStartedSeparatelyMeetInASharedFolder) {
  // Two "nodes": each process gets Slurm's variables, as srun sets them, and the shared folder.
  const std::string shared = (m_dir / "shared").string();
  const std::string common = "SLURM_NTASKS=2 SLURM_JOB_ID=42 SLURM_STEP_ID=0 SLURM_LOCALID=0 LATHE_DIST_HOST=127.0.0.1";
  const std::string args = tiny("--set compute.rendezvous=" + shared);
  const pid_t node1 = start(args, common + " SLURM_PROCID=1");
  const CmdResult r0 = run_shell(common + " SLURM_PROCID=0 " + cli_binary() + " " + args);
  EXPECT_EQ(r0.code, 0) << r0.out;
  EXPECT_NE(r0.out.find("as rank 0 of 2"), std::string::npos) << r0.out;
  EXPECT_EQ(wait_exit(node1, kTimeoutS + 10), 0) << out();
  EXPECT_NE(out().find("as rank 1 of 2"), std::string::npos) << out();
  EXPECT_EQ(only_run().first, RunStatus::finished);  // rank 1 never touched the store
  EXPECT_TRUE(std::filesystem::exists(shared));
}

TEST_F(CliRanks, SrunCannotResumeARunWhoseRanksMetOnOneMachine) {
  // A run of compute.devices=2 met in a folder on its machine: ranks srun starts (maybe on other
  // machines) cannot meet there, so resume refuses, saying how to resume it instead.
  const pid_t rank0 = start(longer());
  wait_started();
  ASSERT_EQ(kill(rank0, SIGTERM), 0);
  EXPECT_EQ(wait_exit(rank0, kTimeoutS + 10), 130) << out();
  const auto [status, error] = only_run();
  ASSERT_EQ(status, RunStatus::cancelled) << error;
  const std::string id = Store::open(db()).list_runs().runs.at(0).run.id;
  const CmdResult r = run_shell("SLURM_NTASKS=2 SLURM_JOB_ID=42 SLURM_STEP_ID=1 SLURM_LOCALID=0 SLURM_PROCID=0 " +
                                cli_binary() + " --db " + db() + " resume " + id);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("compute.rendezvous is \"\" (the run's ranks met on one machine), but slurm started"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("`lathe-cli resume " + id + "` alone"), std::string::npos) << r.out;
  EXPECT_EQ(only_run().first, RunStatus::cancelled);  // the refusal touched nothing
}

TEST_F(CliRanks, SrunRanksAreNotResumedByALoneProcess) {
  // srun's two ranks (compute.devices stays 1 in the config) stopped by SIGTERM, then a plain
  // `lathe-cli resume`: one rank would change the global batch its checkpoints count steps of, so
  // it refuses, saying how to resume instead; the same ranks under srun then finish the run.
  const std::string shared = (m_dir / "shared").string();
  const std::string common = "SLURM_NTASKS=2 SLURM_JOB_ID=42 SLURM_LOCALID=0 LATHE_DIST_HOST=127.0.0.1";
  const std::string args = tiny("--set compute.rendezvous=" + shared +
                                " --set data.train_subset=2048 --set train.epochs=20 --set train.batch_size=32"
                                " --set checkpoint.every_steps=20");
  const pid_t node1 = start(args, common + " SLURM_STEP_ID=0 SLURM_PROCID=1");
  const pid_t node0 = fork();
  if (node0 == 0) {
    const std::string cmd = common + " SLURM_STEP_ID=0 SLURM_PROCID=0 exec " + cli_binary() + " " + args + " > " +
                            (m_dir / "out0.txt").string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  wait_started();
  ASSERT_EQ(kill(node0, SIGTERM), 0);
  EXPECT_EQ(wait_exit(node0, kTimeoutS + 10), 130);
  EXPECT_EQ(wait_exit(node1, kTimeoutS + 10), 130) << out();
  const std::string id = Store::open(db()).list_runs().runs.at(0).run.id;
  const CmdResult r = run_shell(cli_binary() + " --db " + db() + " resume " + id);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("run " + id + " trained on 2 ranks (its dist/world_size) and this resume would run 1: its "
                       "checkpoints count steps of 2 x 32 samples; resume it on 2 ranks, each started by the "
                       "launcher that ran it (`srun lathe-cli resume " + id + "`)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(only_run().first, RunStatus::cancelled);
  const pid_t again1 = start("--db " + db() + " resume " + id, common + " SLURM_STEP_ID=1 SLURM_PROCID=1");
  const CmdResult r0 =
      run_shell(common + " SLURM_STEP_ID=1 SLURM_PROCID=0 " + cli_binary() + " --db " + db() + " resume " + id);
  EXPECT_EQ(r0.code, 0) << r0.out;
  EXPECT_EQ(wait_exit(again1, kTimeoutS + 10), 0) << out();
  EXPECT_EQ(only_run().first, RunStatus::finished);
}

}  // namespace
}  // namespace lathe::test
