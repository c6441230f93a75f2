// Rank discovery: which rank of how many this process is, and its rank on this machine. From
// explicit values (lathe-cli's --rank/--world-size/--local-rank), else Slurm's environment (srun),
// else torchrun's convention (RANK, WORLD_SIZE, LOCAL_RANK), else one process (0 of 1).
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
/// value is not a non-negative integer, a required partner is missing, or rank >= world size.
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
