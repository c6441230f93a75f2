// The Slurm resources of a sweep submitted as a job array (lathe-cli sweep --slurm and the GUI's
// sweep dialog): the shared output folder, partition, time limit, GPUs and CPUs per task. One
// checker for both faces, so the GUI refuses exactly what the CLI refuses, and the lathe-cli
// argument list the GUI runs. No Qt.
#pragma once

#include <string>
#include <vector>

namespace lathe {

struct SlurmResources {
  std::string out;        ///< --out: the shared folder (configs/, stores/, logs/, sweep.sbatch)
  std::string partition;  ///< --partition ("" : the cluster's default)
  std::string time;       ///< --time, Slurm's format (e.g. 30:00); "" : the partition's default
  int gpus = -1;          ///< --gpus per task; -1: compute.devices when compute.backend is cuda, else 0
  int cpus = -1;          ///< --cpus per task; -1: train.threads when set, else Slurm's default
};

/// Most GPUs / CPUs per task accepted (a typo guard, not a cluster limit).
constexpr int kMaxSlurmGpus = 64;
constexpr int kMaxSlurmCpus = 4096;

/// Whether `time` is one of Slurm's time-limit forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (digits),
/// or INFINITE / UNLIMITED.
bool is_slurm_time(const std::string& time);

/// Checks every field; ConfigError naming the first bad one (--out, --partition, --time, --gpus,
/// --cpus), its value and what is allowed. `out` must be given; it is not created here.
void check_slurm_resources(const SlurmResources& r);

/// `--slurm --out OUT [--partition P] [--time T] [--gpus G] [--cpus C]`: the options of
/// `lathe-cli sweep` for these resources (defaults left out).
std::vector<std::string> slurm_cli_args(const SlurmResources& r);

}  // namespace lathe
