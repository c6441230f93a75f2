// The arithmetic of running on machines that can be taken away: work split into segments of tau
// seconds, each followed by a checkpoint of C seconds; interruptions arrive as a Poisson process
// with mean time between them M = 1 / lambda; after each one the run waits R seconds for a new
// machine and redoes the work since its last checkpoint. From this follow Young's and Daly's
// recommended intervals, the expected wall time (Daly 2006), and a Monte-Carlo simulation of the
// same process that cross-checks the closed form. Times are in seconds throughout.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

/// Young (1974): tau = sqrt(2 C M).
double young_interval(double checkpoint_s, double mtbi_s);

/// Daly (2006), the higher-order estimate: tau = sqrt(2 C M) [1 + (1/3) sqrt(C / 2M) + (1/9) (C / 2M)] - C
/// for C < 2M, else M.
double daly_interval(double checkpoint_s, double mtbi_s);

/// Inputs of the expected-time model.
struct SpotProcess {
  double work_s = 0;        ///< T_s: the run's work without interruptions or checkpoints
  double interval_s = 0;    ///< tau: work between checkpoints (>= work_s: no checkpoint)
  double checkpoint_s = 0;  ///< C: time to write one checkpoint
  double restart_s = 0;     ///< R: time from an interruption until the work goes on again
  double mtbi_s = 0;        ///< M = 1 / lambda; infinity (or 0 interruptions) means none
};

/// Daly's expected wall time T_w = M e^{R/M} (e^{(tau + C)/M} - 1) T_s / tau: the closed form, with
/// T_s / tau segments taken as a real number. Without interruptions: T_s + C T_s / tau.
double daly_expected_time(const SpotProcess& p);

/// The same process summed over its whole segments (the last one shorter, and followed by no
/// checkpoint: the run ends there), which is what the simulation and a real run do.
double expected_time(const SpotProcess& p);

/// One simulated run of the process. Each interruption lands at a Poisson time; the work since the
/// last checkpoint is lost; restarts can be interrupted too.
struct SimulatedRun {
  double wall_s = 0;
  int64_t interruptions = 0;
  double redone_s = 0;        ///< work done twice (lost at interruptions)
  double restart_wait_s = 0;  ///< time spent waiting for a new machine
  double checkpoint_total_s = 0;
};
SimulatedRun simulate_spot_run(const SpotProcess& p, uint64_t seed);

/// The mean wall time of `runs` simulated runs (seeds seed, seed + 1, ...).
double monte_carlo_expected_time(const SpotProcess& p, int runs, uint64_t seed);

/// Expected wall time for each interval in `intervals` (the $-vs-tau curve, before the price).
std::vector<double> expected_time_curve(SpotProcess p, const std::vector<double>& intervals);

}  // namespace lathe
