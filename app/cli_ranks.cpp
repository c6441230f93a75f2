// Rank planning, the workers rank 0 starts and watches, and the Gloo communicator (cli_ranks.h).
#include "app/cli_ranks.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/dist/gloo_communicator.h"

namespace lathe::cli {

namespace {

constexpr int kMaxWorkers = 64;
std::atomic<pid_t> g_worker_pids[kMaxWorkers];  // for forward_signal_to_workers (0 = free slot)

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

const char* lookup(const dist::EnvLookup& env, const char* name) { return env ? env(name) : std::getenv(name); }

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? " (SIG" + std::string(abbrev) + ")" : std::string());
}

std::string rank_name(int rank, pid_t pid) {
  return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
}

/// Where a worker's output is, for the message of its fault: the user's first place to look.
std::string log_note(const std::string& log) { return log.empty() ? "" : "; its output is in " + log; }

std::string format_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", std::round(s * 10) / 10);
  return buf;
}

}  // namespace

RankPlan plan_ranks(const ExperimentConfig& exp, const RankArgs& args, const std::string& run_id,
                    const dist::EnvLookup& env) {
  RankPlan plan;
  plan.rank = dist::discover_rank(args.flags, env);
  const int devices = exp.compute.devices;
  const bool launched = plan.rank.source == "slurm" || plan.rank.source == "torchrun";
  plan.threads = exp.train.threads;
  plan.host = "127.0.0.1";
  if (plan.rank.source == "default") {
    plan.rank.world_size = devices;  // one machine: this process is rank 0 and starts the others
    plan.workers = devices - 1;
    if (devices > 1 && plan.threads == 0)
      plan.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / devices);
  } else if (devices != 1 && devices != plan.rank.world_size) {
    throw ConfigError("compute.devices: " + std::to_string(devices) + " ranks, but the launcher (" + plan.rank.source +
                      ") started a world of " + std::to_string(plan.rank.world_size) +
                      ": set compute.devices to 1 or " + std::to_string(plan.rank.world_size));
  }
  if (!plan.distributed())
    return plan;
  plan.device = dist::rank_device(std::string(enum_name(exp.compute.backend)), plan.rank, cuda_device_count());
  if (plan.device.gpu() && exp.compute.grad_compression != GradCompression::none)
    throw ConfigError("compute.grad_compression: " + std::string(enum_name(exp.compute.grad_compression)) +
                      " buckets are a Gloo (CPU ranks) feature; GPU ranks all-reduce f32 gradients through NCCL "
                      "(set it to none, or compute.backend to cpu)");
  // The rendezvous id: the config's, the flag's (rank 0 passes its run id), the launcher's job id.
  plan.rendezvous_id = exp.compute.rendezvous_id;
  if (plan.rendezvous_id.empty())
    plan.rendezvous_id = args.rendezvous_id;
  if (plan.rendezvous_id.empty()) {
    const char* job = lookup(env, "SLURM_JOB_ID");
    const char* step = lookup(env, "SLURM_STEP_ID");
    const char* elastic = lookup(env, "TORCHELASTIC_RUN_ID");
    if (plan.rank.source == "slurm" && job)
      plan.rendezvous_id = std::string(job) + "." + (step ? step : "0");
    else if (elastic)
      plan.rendezvous_id = elastic;
    else if (plan.rank.source == "default")
      plan.rendezvous_id = run_id;
  }
  if (plan.rendezvous_id.empty())
    throw ConfigError(
        "compute.rendezvous_id: \"\" and no launcher job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, "
        "--rendezvous-id): the ranks of rank " +
        std::to_string(plan.rank.rank) + " of " + std::to_string(plan.rank.world_size) +
        " cannot find each other; set compute.rendezvous_id to a string every rank shares");
  plan.ranks_dir = (std::filesystem::absolute(exp.output.dir) / (plan.rendezvous_id + ".ranks")).string();
  plan.rendezvous = exp.compute.rendezvous;
  if (plan.rendezvous.empty()) {
    if (launched)
      throw ConfigError("compute.rendezvous: \"\" (a folder on this machine), but " + plan.rank.source +
                        " started the ranks, maybe on several machines: set it to a shared folder or "
                        "redis://host:port");
    plan.rendezvous = plan.ranks_dir;
  }
  if (launched) {
    char name[256] = "";
    if (gethostname(name, sizeof(name)) == 0 && name[0])
      plan.host = name;
  }
  if (const char* host = lookup(env, "LATHE_DIST_HOST"); host && *host)
    plan.host = host;
  return plan;
}

std::shared_ptr<Communicator> connect_ranks(const RankPlan& plan, const ExperimentConfig& exp) {
  dist::GlooOptions o;
  o.rendezvous = plan.rendezvous;
  o.run_id = plan.rendezvous_id;
  o.host = plan.host;
  o.timeout_s = exp.compute.timeout_s;
  o.bucket_mb = exp.compute.bucket_mb;
  // Ranks on one machine sum gradients through shared memory; LATHE_DIST_SHM=0 keeps loopback tcp
  // (bench/dist_overhead.py compares the two).
  if (const char* shm = std::getenv("LATHE_DIST_SHM"); shm && std::string(shm) == "0")
    o.shared_memory = false;
  switch (exp.compute.grad_compression) {
    case GradCompression::none:
      o.compression = dist::GlooOptions::Compression::none;
      break;
    case GradCompression::fp16:
      o.compression = dist::GlooOptions::Compression::fp16;
      break;
    case GradCompression::bf16:
      o.compression = dist::GlooOptions::Compression::bf16;
      break;
  }
  auto host = std::make_shared<dist::GlooCommunicator>(plan.rank.rank, plan.rank.world_size, o);
  return communicator_for_backend(plan.device.backend, std::move(host));
}

void forward_signal_to_workers(int sig) {
  for (auto& p : g_worker_pids) {
    const pid_t pid = p.load();
    if (pid > 0)
      kill(pid, sig);
  }
}

RankWorkers::RankWorkers(const RankPlan& plan, const std::vector<std::string>& run_args, double timeout_s,
                         const std::atomic<bool>* stopping)
    : m_timeout_s(timeout_s), m_stopping(stopping) {
  if (plan.workers <= 0)
    return;
  if (plan.workers >= kMaxWorkers)
    throw ConfigError("compute.devices: at most " + std::to_string(kMaxWorkers) + " ranks on one machine");
  std::filesystem::create_directories(plan.ranks_dir);
  const pid_t parent = getpid();
  for (int r = 1; r <= plan.workers; ++r) {
    std::vector<std::string> args = {"/proc/self/exe"};
    args.insert(args.end(), run_args.begin(), run_args.end());
    args.insert(args.end(), {"--set", "train.threads=" + std::to_string(plan.threads), "--rank", std::to_string(r),
                             "--world-size", std::to_string(plan.rank.world_size), "--local-rank", std::to_string(r),
                             "--rendezvous-id", plan.rendezvous_id});
    const std::string log = plan.ranks_dir + "/rank" + std::to_string(r) + ".log";
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (log_fd < 0)
      throw Error("cannot create the worker log " + log + ": " + std::strerror(errno));
    const pid_t pid = fork();
    if (pid == 0) {
      // The worker dies with rank 0; a rank 0 gone before prctl took effect is caught by getppid.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(137);
      signal(SIGTERM, SIG_DFL);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      const int null_fd = open("/dev/null", O_RDONLY);
      if (null_fd >= 0)
        dup2(null_fd, STDIN_FILENO);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    close(log_fd);
    if (pid < 0)
      throw Error(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    m_workers.push_back({r, pid, false, -1, log});
    g_worker_pids[r - 1].store(pid);
  }
  m_thread = std::thread([this] { watch(); });
}

RankWorkers::~RankWorkers() {
  m_quit.store(true);
  if (m_thread.joinable())
    m_thread.join();
  for (Worker& w : m_workers) {
    if (!w.done) {
      kill(w.pid, SIGKILL);
      waitpid(w.pid, nullptr, 0);
    }
    g_worker_pids[w.rank - 1].store(0);
  }
}

void RankWorkers::set_fault(const std::string& message) {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_fault.empty())
    m_fault = message;
}

std::string RankWorkers::fault() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_fault;
}

std::string RankWorkers::wait_fault(double grace_s) const {
  const double end = now_s() + grace_s;
  std::string f = fault();
  while (f.empty() && now_s() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    f = fault();
  }
  if (f.empty()) {  // no fault, but a rank that left after a stop rank 0 did not take part in
    std::lock_guard<std::mutex> lock(m_mutex);
    f = m_stopped;
  }
  return f;
}

std::vector<pid_t> RankWorkers::pids() const {
  std::vector<pid_t> out;
  for (const Worker& w : m_workers)
    out.push_back(w.pid);
  return out;
}

void RankWorkers::poll_once(double hang_after_s) {
  const bool stopping = m_stopping && m_stopping->load();
  for (Worker& w : m_workers) {
    if (w.done)
      continue;
    int st = 0;
    const pid_t got = waitpid(w.pid, &st, WNOHANG | WUNTRACED | WCONTINUED);
    if (got == w.pid) {
      if (WIFSTOPPED(st)) {
        w.stopped_since = now_s();
      } else if (WIFCONTINUED(st)) {
        w.stopped_since = -1;
      } else if (WIFEXITED(st)) {
        w.done = true;
        g_worker_pids[w.rank - 1].store(0);
        const int code = WEXITSTATUS(st);
        if (code == 75 || code == 130) {  // interrupted / cancelled: the end of a stop every rank agreed on
          std::lock_guard<std::mutex> lock(m_mutex);
          if (m_stopped.empty())
            m_stopped = rank_name(w.rank, w.pid) + " stopped (exit " + std::to_string(code) + ", " +
                        (code == 75 ? "interrupted" : "cancelled") + ")" + log_note(w.log);
        } else if (code != 0) {
          set_fault(rank_name(w.rank, w.pid) + " exited with status " + std::to_string(code) + log_note(w.log));
        }
      } else if (WIFSIGNALED(st)) {
        w.done = true;
        g_worker_pids[w.rank - 1].store(0);
        const int sig = WTERMSIG(st);
        if (!(stopping && sig == SIGTERM))
          set_fault(rank_name(w.rank, w.pid) + " was killed by signal " + signal_text(sig) + log_note(w.log));
      }
      continue;
    }
    const double t = now_s();
    double silent_since = w.stopped_since;
    if (hang_after_s > 0 && (silent_since < 0 || hang_after_s < silent_since))
      silent_since = hang_after_s;
    if (silent_since >= 0 && t - silent_since > m_timeout_s) {
      set_fault(rank_name(w.rank, w.pid) + " stopped answering for " + format_s(t - silent_since) + " s" +
                log_note(w.log));
      kill(w.pid, SIGKILL);  // reaped by the next poll; the fault above stays the first
      w.stopped_since = -1;
    }
  }
}

void RankWorkers::watch() {
  while (!m_quit.load()) {
    poll_once(m_join_since.load());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string RankWorkers::join(bool stopped) {
  m_join_since.store(now_s());
  for (;;) {
    bool all_done = true;
    {
      // The watcher owns m_workers' state; a done worker's pid slot is 0.
      for (const Worker& w : m_workers)
        if (g_worker_pids[w.rank - 1].load() != 0)
          all_done = false;
    }
    if (all_done)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::lock_guard<std::mutex> lock(m_mutex);
  if (m_fault.empty() && !stopped && !m_stopped.empty())  // rank 0 finished, a worker did not
    m_fault = m_stopped;
  return m_fault;
}

}  // namespace lathe::cli
