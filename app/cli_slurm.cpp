// lathe-cli sweep --slurm / --cancel (see cli_slurm.h): the sbatch script, sbatch, scancel.
#include "app/cli_slurm.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

#include "engine/core/error.h"
#include "engine/core/file_write.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"

namespace lathe::cli {

namespace {

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Output {
  int code = -1;
  std::string text;
};

/// Runs a command line, capturing stdout and stderr together.
Output run_command(const std::string& cmd) {
  Output o;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p)
    throw Error("cannot start: " + cmd);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    o.text.append(buf.data(), n);
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

}  // namespace

void add_slurm_options(CLI::App& sweep, SlurmOptions& o) {
  sweep.add_flag("--slurm", o.enabled, "Submit the sweep to Slurm as a job array instead of running it here");
  sweep.add_option("--out", o.out, "--slurm: the shared folder every task writes its own store file in");
  sweep.add_option("--partition", o.partition, "--slurm: the partition");
  sweep.add_option("--time", o.time, "--slurm: the time limit per run (Slurm's format, e.g. 30:00)");
  sweep.add_option("--gpus", o.gpus, "--slurm: GPUs per run (default: compute.devices on cuda, else 0)");
  sweep.add_option("--cpus", o.cpus, "--slurm: CPUs per run (default: train.threads when set)");
}

std::string sbatch_script(const std::string& sweep_id, const std::string& lathe_cli, const SlurmOptions& o,
                          const std::vector<std::string>& run_ids, int gpus, int cpus) {
  std::string s = "#!/bin/bash\n";
  s += "# lathe sweep " + sweep_id + ": member i of " + std::to_string(run_ids.size()) +
       " runs configs/member-i.json into its own store stores/member-i.db (merge: lathe-cli import " + o.out + ")\n";
  s += "#SBATCH --job-name=lathe-" + sweep_id + "\n";
  s += "#SBATCH --array=0-" + std::to_string(run_ids.size() - 1) + "\n";
  // One process per task: the batch script runs lathe-cli itself (no srun step), which the rank
  // discovery (engine/dist/rank_env) reads as one process, whatever SLURM_PROCID says.
  s += "#SBATCH --ntasks=1\n";
  s += "#SBATCH --chdir=" + o.out + "\n";
  s += "#SBATCH --output=" + o.out + "/logs/member-%a.log\n";
  if (!o.partition.empty())
    s += "#SBATCH --partition=" + o.partition + "\n";
  if (!o.time.empty())
    s += "#SBATCH --time=" + o.time + "\n";
  if (gpus > 0)
    s += "#SBATCH --gpus=" + std::to_string(gpus) + "\n";
  if (cpus > 0)
    s += "#SBATCH --cpus-per-task=" + std::to_string(cpus) + "\n";
  s += "set -eu\n";
  s += "ids=(";
  for (size_t i = 0; i < run_ids.size(); ++i)
    s += (i ? " " : "") + run_ids[i];
  s += ")\n";
  s += "i=${SLURM_ARRAY_TASK_ID}\n";
  s += "exec " + shell_quote(lathe_cli) + " --db " + shell_quote(o.out) + "/stores/member-$i.db run " +
       shell_quote(o.out) + "/configs/member-$i.json --run-id \"${ids[$i]}\" --json\n";
  return s;
}

int submit_slurm_sweep(Store& store, const std::string& sweep_id, const SlurmOptions& options, bool json) {
  check_slurm_resources(options);  // the same checks as the GUI's sweep dialog
  SlurmOptions o = options;
  o.out = std::filesystem::absolute(options.out).lexically_normal().string();
  check_slurm_resources(o);
  for (const char* sub : {"configs", "stores", "logs"})
    std::filesystem::create_directories(std::filesystem::path(o.out) / sub);

  const std::vector<SweepMemberRecord> members = sweep_members(store, sweep_id);
  std::vector<std::string> run_ids;
  std::set<std::string> taken;
  int gpus = o.gpus, cpus = o.cpus;
  for (const SweepMemberRecord& m : members) {
    std::string id;
    do
      id = new_run_id(store);
    while (!taken.insert(id).second);
    run_ids.push_back(id);
    const nlohmann::json cfg = nlohmann::json::parse(m.config_json);
    write_file_atomic(o.out + "/configs/member-" + std::to_string(m.index) + ".json", cfg.dump(2) + "\n");
    if (m.index == 0) {  // resources from the config (every member shares the base's compute section)
      const nlohmann::json compute = cfg.value("compute", nlohmann::json::object());
      if (gpus < 0)
        gpus = compute.value("backend", std::string()) == "cuda" ? compute.value("devices", 1) : 0;
      if (cpus < 0)
        cpus = cfg.value("train", nlohmann::json::object()).value("threads", 0);
    }
  }
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string script_path = o.out + "/sweep.sbatch";
  write_file_atomic(script_path, sbatch_script(sweep_id, exe, o, run_ids, gpus, cpus));

  const Output r = run_command("sbatch --parsable " + shell_quote(script_path));
  if (r.code != 0)
    throw Error("sbatch " + script_path + " failed (exit " + std::to_string(r.code) + "): " + r.text);
  std::string job = r.text.substr(0, r.text.find_first_of(";\n"));
  if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos)
    throw Error("sbatch printed no job id: " + r.text);
  set_sweep_slurm(store, sweep_id, job, o.out);
  for (size_t i = 0; i < members.size(); ++i)
    set_sweep_member(store, sweep_id, members[i].index, run_ids[i], MemberState::running);
  if (json)
    std::cout << nlohmann::json{{"sweep", sweep_id}, {"slurm_job", job}, {"folder", o.out},
                                {"tasks", members.size()}}
                     .dump()
              << "\n";
  else
    std::fprintf(stderr,
                 "lathe: sweep %s submitted as Slurm job %s (%zu tasks); follow it with `lathe-cli import %s` "
                 "(or the GUI), cancel with `lathe-cli sweep --cancel %s`\n",
                 sweep_id.c_str(), job.c_str(), members.size(), o.out.c_str(), sweep_id.c_str());
  return 0;
}

int cancel_slurm_sweep(const std::string& db_path, const std::string& sweep_ref) {
  Store store = Store::open(db_path);
  const SweepRecord s = find_sweep(store, sweep_ref);
  if (s.slurm_job.empty())
    throw DataError("sweep " + s.id + " was not submitted to Slurm: stop the `lathe-cli sweep` running it (Ctrl-C)");
  const Output r = run_command("scancel " + shell_quote(s.slurm_job));
  if (r.code != 0) {
    std::fprintf(stderr, "lathe-cli: scancel %s failed (exit %d): %s\n", s.slurm_job.c_str(), r.code, r.text.c_str());
    return r.code;
  }
  set_sweep_status(store, s.id, "cancelled");
  std::fprintf(stderr, "lathe: sweep %s: Slurm job %s cancelled\n", s.id.c_str(), s.slurm_job.c_str());
  return 0;
}

}  // namespace lathe::cli
