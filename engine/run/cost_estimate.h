// What a run costs before (or after) it is paid for: expected wall time and dollars on-demand and
// on spot, from a measured step time and a measured checkpoint write, with the checkpoint interval
// Young and Daly recommend (spot_model.h) and a Monte-Carlo cross-check. Every input says how it was
// obtained, so the output can tell a measurement from a projection.
#pragma once

#include <string>
#include <vector>

#include "engine/run/cost_model.h"
#include "engine/run/spot_model.h"

namespace lathe {

/// The facts a cost estimate starts from.
struct CostInputs {
  double work_s = 0;  ///< the run's wall time without interruptions or checkpoints
  std::string work_how;
  double checkpoint_s = 0;  ///< one checkpoint write
  std::string checkpoint_how;
  double restart_s = 300;  ///< interruption -> work going on again (new instance, start-up, resume)
  double interruptions_per_hour = 0;
  const InstancePrice* instance = nullptr;
  int devices = 1;
};

/// One point of the $-vs-interval curve.
struct IntervalCost {
  double interval_s = 0, wall_s = 0, usd = 0;
};

struct CostEstimate {
  double on_demand_wall_s = 0, on_demand_usd = 0;    ///< no interruptions, no checkpoints
  double spot_usd_no_interruptions = 0;              ///< the same work at the spot price
  double young_interval_s = 0, daly_interval_s = 0;  ///< 0 when there are no interruptions
  double spot_wall_s = 0, spot_usd = 0;              ///< expected, checkpointing at the Young interval
  double spot_wall_daly_closed_s = 0;                ///< Daly's closed form at the same interval
  double spot_wall_monte_carlo_s = 0;                ///< mean of simulated runs at the same interval
  int monte_carlo_runs = 0;
  std::vector<IntervalCost> curve;  ///< expected $ (spot) against the interval, log-spaced around Young's
};

/// The estimate for `in`. lathe::Error for negative or missing inputs.
CostEstimate estimate_cost(const CostInputs& in, int monte_carlo_runs = 10000, uint64_t seed = 0);

/// Times writing `bytes` the way a checkpoint is written (temporary file, fsync, rename, folder
/// fsync) in `folder`; the median of `repeats` writes, in seconds. The file is removed afterwards.
/// DataError when the folder cannot be written.
double measure_checkpoint_write(const std::string& folder, int64_t bytes, int repeats = 3);

}  // namespace lathe
