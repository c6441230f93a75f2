// The spot supervisor: `lathe-cli run` with cost.interruptions_per_hour = lambda > 0 runs the
// training in a child lathe-cli and plays the cloud. At Poisson times (seeded by the run's seed)
// it delivers a spot notice (SIGUSR1: the child writes an emergency checkpoint and exits
// `interrupted`), SIGKILLs the child if it is still there when cost.notice_s ends (the machine
// going away), waits cost.restart_s (a new instance) and starts `lathe-cli resume` until the run
// is done. The run's clock runs on through the restarts, so cost/usd includes the lost work and the
// waits; at the end it adds spot/interruptions, spot/kills, spot/restarts, spot/steps_redone,
// spot/seconds_redone, spot/restart_wait_s and cost/usd_on_demand (the same work on-demand,
// uninterrupted) to the run, and a spot/interruption event per interruption.
// A data-parallel run (compute.devices = N on one machine) is one machine to it: the child is rank 0,
// which starts its N-1 workers as usual; the notice goes to rank 0 and the ranks' stop agreement
// stops every rank after the same step; the kill takes rank 0 and its workers; `resume` starts all
// N ranks again. The supervisor is the ranks' subreaper and restarts only once every one is gone.
// Ranks a launcher started (srun, torchrun, --rank) are refused by `run`: they are not its to restart.
#pragma once

#include <string>
#include <vector>

#include "engine/run/config.h"

namespace lathe::cli {

struct SupervisorSetup {
  std::string db;
  std::string run_id;                 ///< the id the first child is told to use
  std::vector<std::string> run_args;  ///< the child `run` command line after the binary (db, config, --set...)
  bool json = false;
};

/// Runs the supervised experiment; returns the exit code of `lathe-cli run`.
int supervise_spot_run(const ExperimentConfig& exp, const SupervisorSetup& setup);

}  // namespace lathe::cli
