// The spot supervisor of `lathe-cli run` (see cli_supervisor.h): child processes, Poisson notices,
// SIGKILL of every rank at the end of the notice window, restarts, and the run's spot metrics at the end.
#include "app/cli_supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/core/timing.h"
#include "engine/run/cost_model.h"
#include "engine/store/run_writer.h"
#include "engine/store/store.h"

namespace lathe::cli {

namespace {

std::atomic<bool> g_supervisor_stop{false};
void on_supervisor_signal(int) { g_supervisor_stop.store(true); }

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  static const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error("spot supervisor: fork failed");
  if (pid == 0) {
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// What one child wrote to metrics.jsonl (its lines from `offset` on).
struct Section {
  int64_t resumed_from = -1;  ///< the resumed event's from_step (-1: the first child)
  int64_t reached = -1;       ///< the last training step logged or checkpointed
  double first_wall_ms = -1;  ///< its first sample (set-up done)
  double last_wall_ms = -1;   ///< its last training sample
};

// Reads a child's lines; `first_wall` keeps when each training step was first logged (all children).
Section read_section(const std::string& jsonl, int64_t& offset, std::map<int64_t, double>& first_wall) {
  Section s;
  std::ifstream in(jsonl);
  if (!in)
    return s;
  in.seekg(offset);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object())
      continue;
    const std::string event = j.value("event", "");
    if (event == "resumed" && s.resumed_from < 0)
      s.resumed_from = j.value("from_step", int64_t{0});
    if (event == "checkpoint")  // an emergency checkpoint is the step the child got to
      s.reached = std::max(s.reached, j.value("step", int64_t{-1}));
    if (!j.contains("metric") || !j["metric"].is_string())
      continue;
    const double wall = j.value("wall_ms", 0.0);
    if (s.first_wall_ms < 0)
      s.first_wall_ms = wall;
    if (j["metric"].get<std::string>().rfind("train/", 0) == 0 || j["metric"] == "ckpt/write_s") {
      const int64_t step = j.value("step", int64_t{-1});
      s.reached = std::max(s.reached, step);
      s.last_wall_ms = std::max(s.last_wall_ms, wall);
      first_wall.emplace(step, wall);
    }
  }
  in.clear();
  offset = std::filesystem::exists(jsonl) ? static_cast<int64_t>(std::filesystem::file_size(jsonl)) : offset;
  return s;
}

struct Interruption {
  double at_s = 0;  ///< since the run started
  bool killed = false;
  int64_t reached = -1, resumed_from = -1;
  double seconds_redone = 0;
  double up_s = 0;  ///< run clock when the interrupted child had finished setting up
};

/// The live processes whose parent is `parent` (from /proc/<pid>/stat; zombies left out).
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream f(e.path() / "stat");
    std::string stat;
    if (!std::getline(f, stat))
      continue;
    const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos)
      continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == parent && state != 'Z')
      out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

/// The machine goes away: rank 0 (`pid`) and the ranks it started, all at once. (Its workers
/// would die with it anyway, PR_SET_PDEATHSIG, a moment later.)
void kill_machine(pid_t pid) {
  const std::vector<pid_t> workers = children_of(pid);
  ::kill(pid, SIGKILL);
  for (const pid_t worker : workers)
    ::kill(worker, SIGKILL);
}

/// After rank 0 has been reaped: waits for every process of the old instance to be gone. The
/// supervisor is their subreaper, so a worker that outlived rank 0 for a moment (killed with it,
/// not yet dead) is its child now; a new instance starts only on a machine with none left.
void reap_instance() {
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  while (true) {
    const pid_t r = ::waitpid(-1, nullptr, WNOHANG);
    if (r > 0)
      continue;
    if (r < 0)  // ECHILD: nothing left
      return;
    if (Clock::now() > give_up) {  // not ours to wait for any longer: take it away like the machine
      for (const pid_t p : children_of(::getpid()))
        ::kill(p, SIGKILL);
      ::waitpid(-1, nullptr, 0);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// Whether the run already ended `finished` in the store (read only, nothing reaped).
bool run_finished(const std::string& db, const std::string& run_id) {
  Store::OpenOptions o;
  o.read_only = true;
  return Store::open(db, o).run(run_id).status == RunStatus::finished;
}

}  // namespace

int supervise_spot_run(const ExperimentConfig& exp, const SupervisorSetup& setup) {
  const double lambda_per_s = exp.cost.interruptions_per_hour / 3600.0;
  const double notice_s = exp.cost.notice_window_s();
  const double restart_s = exp.cost.restart_s;
  Rng rng(exp.seed ^ 0x5107c0de5107c0deull);
  auto draw = [&] { return -std::log(1.0 - rng.uniform()) / lambda_per_s; };
  std::signal(SIGTERM, on_supervisor_signal);
  std::signal(SIGINT, on_supervisor_signal);
  // The ranks rank 0 starts (compute.devices = N) become the supervisor's children when rank 0 is
  // gone, so that it can see every one of them gone before a restart.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  const std::string jsonl = (std::filesystem::path(exp.output.dir) / setup.run_id / "metrics.jsonl").string();
  const auto t0 = Clock::now();
  std::vector<std::string> first = setup.run_args;
  first.insert(first.end(), {"--run-id", setup.run_id, "--no-supervise"});
  pid_t pid = spawn(first);
  double next_notice = draw();  // seconds since t0
  bool noticed = false, killed = false;
  double notice_at = 0, restart_wait = 0, setup_after_restart = 0, spawn_at = 0;
  int64_t offset = 0;
  std::map<int64_t, double> first_wall;
  std::vector<Interruption> interruptions;
  int restarts = 0;
  size_t pending = SIZE_MAX;  // the interruption the running child resumes after
  int exit_code = 0;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      reap_instance();
      const Section sec = read_section(jsonl, offset, first_wall);
      if (pending != SIZE_MAX) {
        // The interruption before this child: now we know where the child resumed from.
        Interruption& prev = interruptions[pending];
        prev.resumed_from = std::max<int64_t>(sec.resumed_from, 0);
        if (prev.reached > prev.resumed_from) {
          auto at = first_wall.upper_bound(prev.resumed_from);
          const double resumed_wall = at == first_wall.begin() ? 0 : std::prev(at)->second;
          // Training time lost: from the resumed step (or the child's start, if later) to the kill.
          prev.seconds_redone = std::max(0.0, prev.seconds_redone - std::max(resumed_wall / 1000.0, prev.up_s));
        } else {
          prev.seconds_redone = 0;
        }
        if (sec.first_wall_ms >= 0)
          setup_after_restart += std::max(0.0, sec.first_wall_ms / 1000.0 - spawn_at);
        pending = SIZE_MAX;
      }
      if (!noticed) {
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;  // finished, failed or cancelled on its own
      }
      if (run_finished(setup.db, setup.run_id)) {
        // The notice (or the kill) came as the child was finishing: the run ended before the
        // machine went, so there is nothing to resume and the interruption cost nothing.
        interruptions.pop_back();
        if (!setup.json)
          std::fprintf(stderr, "lathe: spot supervisor: the run finished inside the notice window\n");
        break;
      }
      Interruption& it = interruptions.back();
      it.killed = killed;
      it.reached = sec.reached;
      it.seconds_redone = std::max(0.0, sec.last_wall_ms / 1000.0);  // minus the resumed step's time, once known
      it.up_s = std::max(0.0, sec.first_wall_ms / 1000.0);
      pending = interruptions.size() - 1;
      // The new instance.
      const auto wait_until = Clock::now() + std::chrono::duration<double>(restart_s);
      while (Clock::now() < wait_until && !g_supervisor_stop.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (g_supervisor_stop.load())
        return 130;
      restart_wait += restart_s;
      ++restarts;
      spawn_at = seconds_since(t0);
      char offset_ms[32];
      std::snprintf(offset_ms, sizeof offset_ms, "%.3f", spawn_at * 1000.0);
      std::vector<std::string> args = {"--db",           setup.db,           "resume", setup.run_id,
                                       "--no-supervise", "--wall-offset-ms", offset_ms};
      if (setup.json)
        args.push_back("--json");
      pid = spawn(args);
      next_notice = spawn_at + draw();
      noticed = killed = false;
      continue;
    }
    if (g_supervisor_stop.load()) {
      ::kill(pid, SIGTERM);  // rank 0 passes it on to its workers: every rank stops after the same step
      ::waitpid(pid, &status, 0);
      reap_instance();
      return WIFEXITED(status) ? WEXITSTATUS(status) : 130;
    }
    const double now = seconds_since(t0);
    // A notice goes to a child that is up (its first line is in metrics.jsonl): one sent while it
    // still starts would meet no handler, and it is the running machine that the cloud takes away.
    std::error_code ec;
    const bool up =
        std::filesystem::exists(jsonl, ec) && static_cast<int64_t>(std::filesystem::file_size(jsonl, ec)) > offset;
    if (!noticed && now >= next_notice && up) {
      ::kill(pid, SIGUSR1);  // the spot notice, to rank 0: the ranks' stop agreement stops them all
      noticed = true;
      notice_at = now;
      interruptions.push_back({now, false, -1, -1, 0, 0});
      if (!setup.json)
        std::fprintf(stderr, "\nlathe: spot supervisor: interruption %zu at %.1f s (notice window %g s)\n",
                     interruptions.size(), now, notice_s);
    }
    if (noticed && !killed && now >= notice_at + notice_s) {
      kill_machine(pid);  // the machine goes away
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (exit_code != 0)
    return exit_code;

  // The run's spot figures, added to the finished run.
  const double total_s = seconds_since(t0);
  int64_t steps_redone = 0, kills = 0;
  double seconds_redone = 0;
  for (const Interruption& it : interruptions) {
    steps_redone += std::max<int64_t>(0, it.reached - it.resumed_from);
    seconds_redone += it.seconds_redone;
    kills += it.killed;
  }
  const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
  const InstancePrice& instance = catalog.find(exp.cost.instance);
  const double useful_s = std::max(0.0, total_s - restart_wait - seconds_redone - setup_after_restart);
  RunWriter w(setup.db);
  const ResumePoint point = w.resume(setup.run_id);
  const int64_t step = std::max<int64_t>(point.max_step, 0);
  const double ms = total_s * 1000.0;
  w.sample("spot/interruptions", step, ms, static_cast<double>(interruptions.size()));
  w.sample("spot/kills", step, ms, static_cast<double>(kills));
  w.sample("spot/restarts", step, ms, restarts);
  w.sample("spot/steps_redone", step, ms, static_cast<double>(steps_redone));
  w.sample("spot/seconds_redone", step, ms, seconds_redone);
  w.sample("spot/restart_wait_s", step, ms, restart_wait);
  w.sample("spot/restart_setup_s", step, ms, setup_after_restart);
  w.sample("spot/wall_s", step, ms, total_s);
  w.sample("cost/usd_on_demand", step, ms, cost_usd(instance, false, exp.compute.devices, useful_s));
  for (const Interruption& it : interruptions)
    w.event("spot/interruption", {{"at_s", it.at_s},
                                  {"killed", it.killed},
                                  {"step_reached", it.reached},
                                  {"resumed_from", it.resumed_from},
                                  {"seconds_redone", it.seconds_redone}});
  w.event("spot/summary", {{"interruptions", interruptions.size()},
                           {"kills", kills},
                           {"restarts", restarts},
                           {"steps_redone", steps_redone},
                           {"seconds_redone", seconds_redone},
                           {"restart_wait_s", restart_wait},
                           {"ranks", exp.compute.devices},
                           {"wall_s", total_s},
                           {"on_demand_equivalent_s", useful_s}});
  w.finish(RunStatus::finished);
  if (!setup.json)
    std::fprintf(stderr,
                 "lathe: spot supervisor: %zu interruption(s), %lld killed, %d restart(s), %lld step(s) and %.1f s "
                 "redone, %.1f s waiting for instances\n",
                 interruptions.size(), static_cast<long long>(kills), restarts, static_cast<long long>(steps_redone),
                 seconds_redone, restart_wait);
  return 0;
}

}  // namespace lathe::cli
