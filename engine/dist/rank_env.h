// Rank discovery: which rank of how many this process is, and its rank on this machine. From
// explicit values (lathe-cli's --rank/--world-size/--local-rank), else Slurm's environment in an
// srun task, else torchrun's convention (RANK, WORLD_SIZE, LOCAL_RANK), else one process (0 of 1).
// Slurm sets SLURM_PROCID in two places (its srun and sbatch man pages): in every task of a job
// step that srun starts, beside SLURM_STEP_ID and SLURM_STEP_NUM_TASKS (and SLURM_NTASKS), and in
// an sbatch batch script, which is one process (SLURM_PROCID=0, with SLURM_NTASKS only when
// --ntasks was given, and no step variables). Only the first makes this process a rank of a Slurm
// world; a lathe-cli started directly in a batch script is not one of SLURM_NTASKS ranks (none
// would come to meet it), so it runs as if no launcher had started it and says so (RankInfo::note).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace lathe::dist {

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string source = "default";  // "flags", "slurm", "torchrun" or "default"
  /// What the user should know about how the rank was decided ("" when nothing): set when Slurm
  /// variables were seen but not taken (a batch script, not an srun task).
  std::string note;
  /// Every rank of a world of several was started by someone else (flags, srun, torchrun), not by
  /// this process's rank 0 on this machine.
  bool launched() const { return world_size > 1 && source != "default"; }
};

/// Explicit values; when rank or world_size is given both must be (local_rank defaults to 0).
struct RankFlags {
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
};

/// Reads an environment variable: nullptr when unset (std::getenv by default; tests pass a map).
using EnvLookup = std::function<const char*(const char*)>;

/// The rank of this process. Throws ConfigError naming the flag or variable and its value when a
/// value is not a non-negative integer, a required partner is missing (--world-size for --rank,
/// WORLD_SIZE for RANK; an srun task's world size from SLURM_STEP_NUM_TASKS, else SLURM_NTASKS,
/// else SLURM_NPROCS), or rank >= world size.
RankInfo discover_rank(const RankFlags& flags = {}, const EnvLookup& env = {});

/// The backend and device a rank trains on: one GPU per rank, as torchrun's LOCAL_RANK convention.
struct RankDevice {
  std::string backend;   ///< what make_backend gets: "cuda" for GPU ranks, else compute.backend
  int device_index = 0;  ///< a GPU rank's local rank; 0 on the CPU
  bool gpu() const { return backend == "cuda"; }
};

/// `backend` is compute.backend ("auto", "cpu", "cuda", "reference"), `gpus` the GPUs this machine
/// has. GPU ranks: "cuda", or "auto" with a GPU here. Throws ConfigError naming compute.devices when
/// a GPU rank's local rank has no GPU of its own (ranks never share one: NCCL refuses that).
RankDevice rank_device(const std::string& backend, const RankInfo& rank, int gpus);

}  // namespace lathe::dist
