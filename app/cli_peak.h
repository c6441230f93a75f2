// The best f32 peak FLOP/s recorded in the run store for one CPU model and thread count: the
// peaks earlier runs measured (their "started" events) and the rates they achieved above their
// own peak ("mfu_peak_raised" notes: one rank's rate). Runs whose peak is another data type's
// (bf16) and old notes of multi-rank runs (whose rate was every rank's) are left out. lathe-cli
// passes it to the trainer as the floor of this run's peak, so a peak measured on a busy machine
// cannot inflate MFU.
#pragma once

#include <string>

namespace lathe::cli {

/// 0 when the store does not exist or holds no run of this CPU model with this thread count.
double best_recorded_peak_flops(const std::string& db, const std::string& cpu_model, int threads);

}  // namespace lathe::cli
