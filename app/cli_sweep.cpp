// lathe-cli sweep (see cli_sweep.h): plan, store, run the members as child processes, resume.
#include "app/cli_sweep.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "app/cli_slurm.h"
#include "engine/core/error.h"
#include "engine/core/file_write.h"
#include "engine/run/sweep_definition.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"

namespace lathe::cli {

namespace {

std::atomic<bool> g_sweep_stop{false};
void on_sweep_signal(int) { g_sweep_stop.store(true); }

struct Child {
  int index = 0;
  std::string run_id;
  std::string name;
  std::string log;
};

/// `lathe-cli --db DB run CONFIG --run-id ID --json` (or, continuing a stopped member's run,
/// `lathe-cli --db DB resume ID --json`: `config` empty), output to `log`. The child gets SIGTERM
/// when the sweep process dies (PR_SET_PDEATHSIG): a killed sweep leaves cancelled runs, not orphans.
pid_t spawn_member(const std::string& db, const std::string& config, const std::string& run_id,
                   const std::string& log) {
  static const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::vector<std::string> args =
      config.empty() ? std::vector<std::string>{exe, "--db", db, "resume", run_id, "--json"}
                     : std::vector<std::string>{exe, "--db", db, "run", config, "--run-id", run_id, "--json"};
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error("sweep: fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)  // the sweep died between fork and prctl
      ::_exit(130);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

/// Whether a member that did not finish continues its own run from that run's newest checkpoint
/// (`lathe-cli resume`), as a run stopped by Ctrl-C would: its run was cancelled or interrupted (a
/// stopped or killed sweep) after it had started (its run folder is there), and it is no spot
/// simulation (cost.interruptions_per_hour), which `resume` would run without its supervisor.
/// A failed member, and any other, starts again under a new run id.
bool continues_its_run(const Store& store, const SweepMemberRecord& m) {
  if (m.state != MemberState::cancelled || m.run_id.empty())
    return false;
  const std::optional<RunRecord> run = store.find_run(m.run_id);
  if (!run || (run->status != RunStatus::cancelled && run->status != RunStatus::interrupted))
    return false;
  const nlohmann::json cfg = nlohmann::json::parse(m.config_json, nullptr, false);
  if (cfg.is_object() && cfg.contains("cost") && cfg["cost"].is_object() &&
      cfg["cost"].value("interruptions_per_hour", 0.0) > 0)
    return false;
  for (const EventRecord& e : store.events(m.run_id))
    if (e.kind == "started")
      return true;
  return false;
}

std::string sweep_folder(const std::string& db, const std::string& sweep_id) {
  const std::filesystem::path dir =
      std::filesystem::absolute(db).parent_path() / "sweeps" / sweep_id;
  std::filesystem::create_directories(dir);
  return dir.string();
}

void print_sweeps(const Store& store, bool json) {
  const std::vector<SweepRecord> sweeps = list_sweeps(store);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const SweepRecord& s : sweeps)
      out.push_back({{"id", s.id}, {"name", s.name}, {"status", s.status}, {"state", sweep_state(s)}, {"total", s.total},
                     {"finished", s.finished}, {"failed", s.failed}, {"running", s.running},
                     {"slurm_job", s.slurm_job}, {"folder", s.folder}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  if (sweeps.empty())
    std::cout << "no sweeps in " << store.path() << "\n";
  for (const SweepRecord& s : sweeps)
    std::cout << s.id << "  " << s.name << "  " << s.finished << "/" << s.total << " finished"
              << (s.failed ? "  " + std::to_string(s.failed) + " failed or cancelled" : "") << "  " << sweep_state(s)
              << (s.slurm_job.empty() ? "" : "  slurm job " + s.slurm_job) << "\n";
}

}  // namespace

int run_sweep_members(const std::string& db, const std::string& sweep_id, int jobs, bool json) {
  if (jobs < 1)
    throw ConfigError("--jobs " + std::to_string(jobs) + ": allowed: 1 or more runs at a time");
  Store store = Store::open(db);  // reaps the runs of a killed sweep's members first
  std::vector<SweepMemberRecord> todo;
  for (SweepMemberRecord& m : sweep_members(store, sweep_id)) {
    if (m.state == MemberState::running)
      throw DataError("sweep " + sweep_id + ": member " + std::to_string(m.index) + " (run " + m.run_id +
                      ") is still running: wait for it or stop the process running it, then resume");
    if (m.state != MemberState::finished)
      todo.push_back(std::move(m));
  }
  const SweepRecord sweep = find_sweep(store, sweep_id);
  const std::string folder = sweep_folder(db, sweep_id);
  set_sweep_status(store, sweep_id, "running");
  std::fprintf(stderr, "lathe: sweep %s (%s): %zu of %d runs to go, %d at a time; logs in %s\n", sweep_id.c_str(),
               sweep.name.c_str(), todo.size(), sweep.total, jobs, folder.c_str());

  g_sweep_stop.store(false);
  struct sigaction sa {};
  sa.sa_handler = on_sweep_signal;
  struct sigaction old_int {}, old_term {};
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  const auto t0 = std::chrono::steady_clock::now();
  std::map<pid_t, Child> active;
  size_t next = 0;
  bool told_to_stop = false;
  while (next < todo.size() || !active.empty()) {
    if (g_sweep_stop.load() && !told_to_stop) {
      told_to_stop = true;
      for (const auto& kv : active)
        ::kill(kv.first, SIGTERM);
    }
    while (!g_sweep_stop.load() && next < todo.size() && static_cast<int>(active.size()) < jobs) {
      const SweepMemberRecord& m = todo[next++];
      const bool resume = continues_its_run(store, m);
      Child c{m.index, resume ? m.run_id : new_run_id(store), m.name,
              folder + "/member-" + std::to_string(m.index) + ".log"};
      std::string config;  // "": `resume` the member's own run
      if (!resume) {
        config = folder + "/member-" + std::to_string(m.index) + ".json";
        write_file_atomic(config, nlohmann::json::parse(m.config_json).dump(2) + "\n");
      } else if (!json) {
        std::fprintf(stderr, "lathe: %s continues its run %s from its newest checkpoint\n", c.name.c_str(),
                     c.run_id.c_str());
      }
      set_sweep_member(store, sweep_id, m.index, c.run_id, MemberState::running);
      active.emplace(spawn_member(db, config, c.run_id, c.log), std::move(c));
    }
    if (active.empty())
      break;
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      throw Error("sweep: waitpid failed");
    }
    const auto it = active.find(pid);
    if (it == active.end())
      continue;
    const Child c = it->second;
    active.erase(it);
    const std::optional<RunRecord> run = store.find_run(c.run_id);
    const std::string state = run ? std::string(status_name(run->status)) : "failed";
    const bool ok = run && run->status == RunStatus::finished;
    set_sweep_member(store, sweep_id, c.index, c.run_id,
                     ok ? MemberState::finished
                        : (run && run->status != RunStatus::failed ? MemberState::cancelled : MemberState::failed));
    const SweepRecord now = find_sweep(store, sweep_id);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (json)
      std::cout << nlohmann::json{{"event", "member"}, {"sweep", sweep_id}, {"index", c.index},
                                  {"run_id", c.run_id}, {"status", state}, {"finished", now.finished},
                                  {"total", now.total}}
                       .dump()
                << "\n"
                << std::flush;
    else
      std::fprintf(stderr, "[%d/%d] %s %s (run %s) after %.0f s%s%s\n", now.finished, now.total, state.c_str(),
                   c.name.c_str(), c.run_id.c_str(), s, ok ? "" : "; log: ", ok ? "" : c.log.c_str());
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);

  const SweepRecord end = find_sweep(store, sweep_id);
  const bool stopped = g_sweep_stop.load();
  const std::string final_status =
      end.finished == end.total ? "finished" : stopped ? "cancelled" : "failed";
  set_sweep_status(store, sweep_id, final_status);
  if (json)
    std::cout << nlohmann::json{{"event", "sweep"}, {"sweep", sweep_id}, {"status", final_status},
                                {"finished", end.finished}, {"total", end.total}}
                     .dump()
              << "\n";
  else
    std::fprintf(stderr, "lathe: sweep %s %s: %d/%d runs finished%s\n", sweep_id.c_str(), final_status.c_str(),
                 end.finished, end.total,
                 end.finished == end.total ? "" : ("; `lathe-cli sweep --resume " + sweep_id + "` runs the rest").c_str());
  return end.finished == end.total ? 0 : stopped ? 130 : 1;
}

void add_sweep_command(CLI::App& app, const std::string& db_path, int& exit_code) {
  struct Args {
    std::string definition;
    std::vector<std::string> sets;
    int jobs = 1;
    std::string resume;
    std::string cancel;
    bool list = false;
    bool json = false;
    bool dry_run = false;
    SlurmOptions slurm;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sweep = app.add_subcommand(
      "sweep", "Run a sweep (grid, random search, repeated seeds) from a definition; resume or list sweeps");
  sweep->add_option("definition", a->definition, "Sweep definition JSON (see README, Sweeps)");
  sweep->add_option("--set", a->sets, "Override a value of the base config for every run (repeatable)");
  sweep->add_option("--jobs", a->jobs, "Runs at a time on this machine")->capture_default_str();
  sweep->add_option("--resume", a->resume, "Run the members of this sweep (id, prefix or name) that did not finish");
  sweep->add_option("--cancel", a->cancel, "Cancel a sweep submitted to Slurm (scancel its job)");
  sweep->add_flag("--list", a->list, "List the sweeps of the store with their progress");
  sweep->add_flag("--json", a->json, "JSON output");
  sweep->add_flag("--dry-run", a->dry_run, "Print the planned runs (name and --set list) and store nothing");
  add_slurm_options(*sweep, a->slurm);
  sweep->callback([&, a] {
    const int modes = !a->definition.empty() + !a->resume.empty() + !a->cancel.empty() + a->list;
    if (modes != 1)
      throw ConfigError("sweep: give exactly one of DEFINITION, --resume SWEEP, --cancel SWEEP, --list");
    if (a->jobs < 1)  // before a sweep is stored: a refused option leaves nothing behind
      throw ConfigError("--jobs " + std::to_string(a->jobs) + ": allowed: 1 or more runs at a time");
    if (a->list) {
      print_sweeps(Store::open(db_path, Store::read_only_options()), a->json);
      exit_code = 0;
      return;
    }
    if (!a->cancel.empty()) {
      exit_code = cancel_slurm_sweep(db_path, a->cancel);
      return;
    }
    std::string id;
    if (!a->resume.empty()) {
      Store store = Store::open(db_path);
      id = find_sweep(store, a->resume).id;
      if (!find_sweep(store, id).slurm_job.empty())
        throw DataError("sweep " + id + " was submitted to Slurm: import its folder (lathe-cli import) instead");
    } else {
      const SweepPlan plan = load_sweep_definition(a->definition, a->sets);
      if (a->dry_run) {
        for (const SweepMember& m : plan.members) {
          std::cout << m.index << "  " << m.name;
          for (const std::string& s : m.sets)
            std::cout << "  --set " << s;
          std::cout << "\n";
        }
        exit_code = 0;
        return;
      }
      std::vector<NewSweepMember> members;
      for (const SweepMember& m : plan.members)
        members.push_back({m.name, m.config});
      Store store = Store::open(db_path);
      id = create_sweep(store, plan.name, plan.stored_definition, members);
      std::fprintf(stderr, "lathe: sweep %s (%s): %zu runs\n", id.c_str(), plan.name.c_str(), members.size());
      if (a->slurm.enabled) {
        exit_code = submit_slurm_sweep(store, id, a->slurm, a->json);
        return;
      }
    }
    exit_code = run_sweep_members(db_path, id, a->jobs, a->json);
  });
}

}  // namespace lathe::cli
