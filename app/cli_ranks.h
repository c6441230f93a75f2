// The ranks of a data-parallel `lathe-cli run` (compute.devices = N). On one machine rank 0 starts
// N-1 workers of itself (`/proc/self/exe run CONFIG --rank i --world-size N --local-rank i
// --rendezvous-id ID`), each dying with rank 0 (PR_SET_PDEATHSIG) and logging to
// <output.dir>/<run id>.ranks/rank<i>.log; across machines srun, torchrun or the --rank flags
// start every rank (dist::discover_rank). Rank 0 watches its workers (waitpid): a worker that dies
// or stays stopped for compute.timeout_s is a fault that ends the run `failed`, naming the rank.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/rank_env.h"
#include "engine/exec/communicator.h"
#include "engine/run/config.h"

namespace lathe::cli {

/// The hidden rank flags of `lathe-cli run` (rank 0 sets them for the workers it starts).
struct RankArgs {
  dist::RankFlags flags;
  std::string rendezvous_id;
};

/// How this process takes part in the run.
struct RankPlan {
  dist::RankInfo rank;        ///< this process
  int workers = 0;            ///< workers this process starts (rank 0 of devices = N on one machine: N-1)
  std::string rendezvous;     ///< the store: a folder or redis://host:port
  std::string rendezvous_id;  ///< the key prefix every rank shares
  std::string ranks_dir;      ///< <output.dir>/<id>.ranks: the default store and the workers' logs
  int threads = 0;            ///< train.threads of every rank
  std::string host;           ///< the address Gloo binds to and announces
  dist::RankDevice device;    ///< GPU ranks: cuda and the local rank's GPU (NCCL); else the CPU (Gloo)
  bool distributed() const { return rank.world_size > 1; }
};

/// Decides the ranks from the flags, then Slurm's or torchrun's environment, then compute.devices,
/// and each rank's device (dist::rank_device). `run_id` is the id rank 0 uses. ConfigError when the
/// launcher's world size and compute.devices differ (devices must be 1 or equal), when a launcher's
/// ranks have no compute.rendezvous, when no rendezvous id can be found, when this machine has
/// fewer GPUs than GPU ranks, or with compute.grad_compression on GPU ranks (a Gloo feature).
RankPlan plan_ranks(const ExperimentConfig& exp, const RankArgs& args, const std::string& run_id,
                    const dist::EnvLookup& env = {});

/// Joins the ranks (GlooCommunicator, through which GPU ranks then set up NCCL: the backend's
/// device communicator); throws lathe::Error naming the missing ranks after timeout_s.
std::shared_ptr<Communicator> connect_ranks(const RankPlan& plan, const ExperimentConfig& exp);

/// Sends `sig` to every worker this process started (async-signal-safe: for a signal handler).
void forward_signal_to_workers(int sig);

/// Rank 0's workers on this machine, watched by a thread. The destructor SIGKILLs and reaps any
/// still there, so no worker outlives the run.
class RankWorkers {
 public:
  /// Starts plan.workers workers: `/proc/self/exe` with `run_args` (db, run, config, --set...) and
  /// the rank flags. `stopping` set: a worker ending on SIGTERM (or `cancelled`) is no fault.
  RankWorkers(const RankPlan& plan, const std::vector<std::string>& run_args, double timeout_s,
              const std::atomic<bool>* stopping);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  /// The first fault ("rank 1 (pid 1234) was killed by signal 9 (SIGKILL); its output is in
  /// <ranks_dir>/rank1.log"), "" while none.
  std::string fault() const;
  /// fault(), waiting up to `grace_s` for one (a Gloo error may come before waitpid sees a death);
  /// then, without one, the first worker that exited 75 or 130.
  std::string wait_fault(double grace_s) const;
  /// After rank 0's run: waits until every worker has exited; a worker still running timeout_s
  /// later is killed and is the fault. A worker's exit 75 (interrupted) or 130 (cancelled) ends a
  /// stop every rank agreed on: a fault only when rank 0's run was not `stopped` too. Returns fault().
  std::string join(bool stopped);
  std::vector<pid_t> pids() const;

 private:
  struct Worker {
    int rank = 0;
    pid_t pid = -1;
    bool done = false;
    double stopped_since = -1;  ///< steady seconds when it was stopped (SIGSTOP), -1 = running
    std::string log;            ///< its stdout/stderr (named in its fault)
  };
  void watch();
  void poll_once(double hang_after_s);
  void set_fault(const std::string& message);

  std::vector<Worker> m_workers;
  double m_timeout_s;
  const std::atomic<bool>* m_stopping;
  mutable std::mutex m_mutex;
  std::string m_fault;
  std::string m_stopped;  ///< the first worker that exited 75 or 130 ("rank 1 (pid 12) stopped (...)")
  std::atomic<bool> m_quit{false};
  std::atomic<double> m_join_since{-1};
  std::thread m_thread;
};

}  // namespace lathe::cli
