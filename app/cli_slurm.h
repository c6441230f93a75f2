// lathe-cli sweep --slurm: a stored sweep submitted to Slurm as one job array (sbatch --array,
// one member per task). Each task runs `lathe-cli run` into its own store file in the shared
// folder (SQLite over NFS is unsafe, so never one shared database); `lathe-cli import FOLDER`
// (engine/store/store_import.h) merges them. `sweep --cancel` is scancel of the job.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/run/slurm_options.h"

namespace lathe {
class Store;
}

namespace lathe::cli {

/// The resources (engine/run/slurm_options.h, shared with the GUI's sweep dialog) and --slurm.
struct SlurmOptions : SlurmResources {
  bool enabled = false;  ///< --slurm
};

void add_slurm_options(CLI::App& sweep, SlurmOptions& options);

/// The sbatch script of a sweep whose member i runs `configs/member-i.json` as run `run_ids[i]`
/// into `stores/member-i.db`, all under `options.out` (absolute).
std::string sbatch_script(const std::string& sweep_id, const std::string& lathe_cli, const SlurmOptions& options,
                          const std::vector<std::string>& run_ids, int gpus, int cpus);

/// Writes the folder and the script, submits it (sbatch --parsable), records the job id and
/// folder in the sweep and each member's run id. Returns 0, or throws with sbatch's message.
int submit_slurm_sweep(Store& store, const std::string& sweep_id, const SlurmOptions& options, bool json);

/// scancel of the sweep's job; the sweep becomes `cancelled`. Returns scancel's exit code.
int cancel_slurm_sweep(const std::string& db_path, const std::string& sweep_ref);

}  // namespace lathe::cli
