// lathe-cli's `scaling RUN`: the projected throughput of a recorded run's training on N ranks
// (engine/dist/scaling_model.h), from its measured step time, gradient bytes and, for a run on
// several ranks, the share of the all-reduce its backward pass hid. The step time and the exposed
// communication are the run's steady values (dist::steady_value: the median of train/samples_per_s
// and dist/comm_s after their first sample), not the last logging interval's.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

/// Adds `scaling` to `app`; `db_path` is read when the command runs (the global --db).
void add_scaling_command(CLI::App& app, const std::string& db_path, int& exit_code);

}  // namespace lathe::cli
