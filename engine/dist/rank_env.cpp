// Rank discovery from flags, Slurm or torchrun variables (see rank_env.h).
#include "engine/dist/rank_env.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "engine/core/error.h"

namespace lathe::dist {
namespace {

using detail::concat;

int parse_count(const char* name, const char* text) {
  const std::string value = text;
  int out = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end)
    throw ConfigError(concat(name, "=\"", value, "\" is not an integer (a rank or a count of processes)"));
  if (out < 0)
    throw ConfigError(concat(name, "=", value, " is negative; ranks and counts are >= 0"));
  return out;
}

void check(const RankInfo& info, const char* rank_name, const char* size_name, const char* local_name) {
  if (info.world_size < 1)
    throw ConfigError(concat(size_name, "=", info.world_size, ": the world size must be at least 1"));
  if (info.rank >= info.world_size)
    throw ConfigError(concat(rank_name, "=", info.rank, " is not below ", size_name, "=", info.world_size,
                             " (ranks are 0..", info.world_size - 1, ")"));
  if (info.local_rank >= info.world_size)
    throw ConfigError(concat(local_name, "=", info.local_rank, " is not below ", size_name, "=", info.world_size));
}

// One launcher's convention: the rank variable decides whether it applies; then the size is required.
std::optional<RankInfo> from_env(const EnvLookup& env, const char* rank_var, const char* size_var,
                                 const char* local_var, const char* source) {
  const char* rank = env(rank_var);
  if (!rank)
    return std::nullopt;
  const char* size = env(size_var);
  if (!size)
    throw ConfigError(concat(rank_var, "=", rank, " is set but ", size_var, " is not"));
  RankInfo info;
  info.rank = parse_count(rank_var, rank);
  info.world_size = parse_count(size_var, size);
  const char* local = env(local_var);
  info.local_rank = local ? parse_count(local_var, local) : 0;
  info.source = source;
  check(info, rank_var, size_var, local_var);
  return info;
}

// Slurm: a rank only in a task of an srun job step (SLURM_STEP_ID or SLURM_STEP_NUM_TASKS set);
// in a batch script (SLURM_PROCID without them) `note` says why the variables are not taken.
std::optional<RankInfo> from_slurm(const EnvLookup& env, std::string& note) {
  const char* rank = env("SLURM_PROCID");
  if (!rank)
    return std::nullopt;
  const char* step = env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : env("SLURM_STEPID");
  const char* step_tasks = env("SLURM_STEP_NUM_TASKS");
  if (!step && !step_tasks) {
    // Worth saying only where the user may have meant several ranks (sbatch --ntasks > 1).
    const char* ntasks = env("SLURM_NTASKS");
    if (ntasks && std::string(ntasks) != "1")
      note = concat("SLURM_PROCID=", rank, " and SLURM_NTASKS=", ntasks,
                    " without SLURM_STEP_ID: a Slurm batch script, not a task of an srun job step, so this process "
                    "is not one of ",
                    ntasks,
                    " ranks; it runs as one process (compute.devices ranks on this node). "
                    "Start it with `srun lathe-cli run ...` for one rank per Slurm task");
    return std::nullopt;
  }
  const char* size_var = step_tasks ? "SLURM_STEP_NUM_TASKS" : env("SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  const char* size = env(size_var);
  if (!size)
    throw ConfigError(concat("SLURM_PROCID=", rank, " is set in an srun task (SLURM_STEP_ID=", step ? step : "?",
                             ") but none of SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_NPROCS is: the world size is "
                             "unknown (srun sets them; or give --rank and --world-size)"));
  RankInfo info;
  info.rank = parse_count("SLURM_PROCID", rank);
  info.world_size = parse_count(size_var, size);
  const char* local = env("SLURM_LOCALID");
  info.local_rank = local ? parse_count("SLURM_LOCALID", local) : 0;
  info.source = "slurm";
  check(info, "SLURM_PROCID", size_var, "SLURM_LOCALID");
  return info;
}

}  // namespace

RankInfo discover_rank(const RankFlags& flags, const EnvLookup& env_in) {
  const EnvLookup env = env_in ? env_in : EnvLookup([](const char* name) { return std::getenv(name); });
  if (flags.rank || flags.world_size) {
    if (!flags.rank || !flags.world_size)
      throw ConfigError(flags.rank ? "--rank is given without --world-size" : "--world-size is given without --rank");
    auto flag_value = [](const char* name, int v) {
      if (v < 0)
        throw ConfigError(concat(name, "=", v, " is negative; ranks and counts are >= 0"));
      return v;
    };
    RankInfo info;
    info.rank = flag_value("--rank", *flags.rank);
    info.world_size = flag_value("--world-size", *flags.world_size);
    info.local_rank = flags.local_rank ? flag_value("--local-rank", *flags.local_rank) : 0;
    info.source = "flags";
    check(info, "--rank", "--world-size", "--local-rank");
    return info;
  }
  if (flags.local_rank)
    throw ConfigError("--local-rank is given without --rank and --world-size");
  std::string note;
  if (auto slurm = from_slurm(env, note))
    return *slurm;
  if (auto torchrun = from_env(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun")) {
    torchrun->note = note;
    return *torchrun;
  }
  RankInfo info;
  info.note = note;
  return info;
}

RankDevice rank_device(const std::string& backend, const RankInfo& rank, int gpus) {
  const bool gpu = backend == "cuda" || (backend == "auto" && gpus > 0);
  if (!gpu)
    return {backend, 0};
  if (rank.local_rank >= gpus)
    throw ConfigError("compute.devices: rank " + std::to_string(rank.rank) + " of " + std::to_string(rank.world_size) +
                      " is local rank " + std::to_string(rank.local_rank) + " on a machine with " +
                      std::to_string(gpus) + " GPU(s): one GPU per rank (set compute.devices to at most " +
                      std::to_string(gpus) + " per machine, or compute.backend to cpu)");
  return {"cuda", rank.local_rank};
}

}  // namespace lathe::dist
