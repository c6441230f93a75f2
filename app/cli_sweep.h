// lathe-cli sweep: a sweep definition (engine/run/sweep_definition.h) stored as a sweep
// (engine/store/sweep_store.h) and run, each member a child `lathe-cli run` (like the GUI's
// queue), N at a time; `--resume SWEEP` runs the members whose run did not finish; `--list` shows
// sweeps with their progress; `--slurm` submits a job array instead (cli_slurm.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lathe::cli {

void add_sweep_command(CLI::App& app, const std::string& db_path, int& exit_code);

/// Runs the sweep's unfinished members in the store at `db_path`, `jobs` at a time, each
/// `lathe-cli run` child writing that store; its output goes to <store folder>/sweeps/<id>/.
/// SIGINT/SIGTERM stop it (the children are told to stop, their runs end cancelled). Returns
/// 0 when every member finished, 1 when some failed, 130 when stopped.
int run_sweep_members(const std::string& db_path, const std::string& sweep_id, int jobs, bool json);

}  // namespace lathe::cli
