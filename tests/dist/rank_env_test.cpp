// Rank discovery: flags, then Slurm (an srun task only: SLURM_STEP_ID beside SLURM_PROCID; a batch
// script's SLURM_PROCID=0 is one process), then torchrun, then 0 of 1; malformed values are
// ConfigErrors naming the variable and its value.
#include "engine/dist/rank_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/core/error.h"

using lathe::ConfigError;
using lathe::dist::discover_rank;
using lathe::dist::EnvLookup;
using lathe::dist::RankFlags;

namespace {

EnvLookup env_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

// The ConfigError's message, or "" when none is thrown.
std::string error_of(const RankFlags& flags, const std::map<std::string, std::string>& vars) {
  try {
    discover_rank(flags, env_of(vars));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RankEnv, NothingSetIsOneProcess) {
  auto info = discover_rank({}, env_of({}));
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.source, "default");
}

TEST(RankEnv, FlagsWinOverEnvironment) {
  RankFlags flags{2, 4, 1};
  auto info = discover_rank(flags, env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"RANK", "5"}}));
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "flags");
}

TEST(RankEnv, SlurmWinsOverTorchrun) {
  auto info = discover_rank({}, env_of({{"SLURM_PROCID", "3"},
                                        {"SLURM_NTASKS", "4"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"SLURM_LOCALID", "1"},
                                        {"RANK", "0"},
                                        {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(info.note, "");
}

TEST(RankEnv, AnSrunTaskTakesTheStepsTaskCount) {
  // What srun sets in each task (its man page): the step's size wins over the job's SLURM_NTASKS
  // (an `srun -n 2` inside an `sbatch -n 8` job), then SLURM_NTASKS, then SLURM_NPROCS.
  auto info = discover_rank({}, env_of({{"SLURM_PROCID", "1"},
                                        {"SLURM_STEP_ID", "3"},
                                        {"SLURM_STEP_NUM_TASKS", "2"},
                                        {"SLURM_NTASKS", "8"},
                                        {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "slurm");
  EXPECT_EQ(discover_rank({}, env_of({{"SLURM_PROCID", "2"}, {"SLURM_STEPID", "0"}, {"SLURM_NPROCS", "3"}})).world_size,
            3);  // the older names
  EXPECT_EQ(discover_rank({}, env_of({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}})).world_size, 2);
  const std::string msg = error_of({}, {{"SLURM_PROCID", "1"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_NE(msg.find("SLURM_PROCID=1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("SLURM_STEP_NUM_TASKS, SLURM_NTASKS, SLURM_NPROCS"), std::string::npos) << msg;
  EXPECT_NE(error_of({}, {{"SLURM_PROCID", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}})
                .find("SLURM_STEP_NUM_TASKS=2"),
            std::string::npos);
}

TEST(RankEnv, ASlurmBatchScriptIsOneProcess) {
  // sbatch's batch step: SLURM_PROCID=0 and SLURM_LOCALID=0, SLURM_NTASKS only with --ntasks, no
  // step variables. One process runs the script, so it is no rank of a Slurm world (rank 0 of 4
  // would wait for 3 ranks that never come); it falls through to torchrun's variables or 0 of 1.
  auto info = discover_rank({}, env_of({{"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "7"}}));
  EXPECT_EQ(info.source, "default");
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.note, "") << "nothing to say where no one expected several ranks";
  EXPECT_EQ(discover_rank({}, env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})).note, "");
  info = discover_rank({}, env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_JOB_ID", "7"}}));
  EXPECT_EQ(info.source, "default");
  EXPECT_EQ(info.world_size, 1);
  EXPECT_NE(info.note.find("SLURM_NTASKS=4 without SLURM_STEP_ID"), std::string::npos) << info.note;
  EXPECT_NE(info.note.find("srun lathe-cli run"), std::string::npos) << info.note;
  info = discover_rank({}, env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(info.source, "torchrun");
  EXPECT_EQ(info.rank, 1);
  EXPECT_FALSE(info.note.empty());
}

TEST(RankEnv, Torchrun) {
  auto info = discover_rank({}, env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}}));
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "torchrun");
  // LOCAL_RANK is optional.
  EXPECT_EQ(discover_rank({}, env_of({{"RANK", "1"}, {"WORLD_SIZE", "3"}})).local_rank, 0);
}

TEST(RankEnv, RankNotBelowWorldSizeNamesBoth) {
  auto msg = error_of({}, {{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("RANK=2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WORLD_SIZE=2"), std::string::npos) << msg;
  msg = error_of({}, {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_NE(msg.find("SLURM_PROCID=4"), std::string::npos) << msg;
  msg = error_of(RankFlags{3, 3, std::nullopt}, {});
  EXPECT_NE(msg.find("--rank=3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--world-size=3"), std::string::npos) << msg;
  msg = error_of({}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}});
  EXPECT_NE(msg.find("LOCAL_RANK=2"), std::string::npos) << msg;
}

TEST(RankEnv, NonNumbersAndNegativesNameTheVariableAndValue) {
  auto msg = error_of({}, {{"RANK", "one"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("RANK=\"one\""), std::string::npos) << msg;
  msg = error_of({}, {{"RANK", "1"}, {"WORLD_SIZE", "2x"}});
  EXPECT_NE(msg.find("WORLD_SIZE=\"2x\""), std::string::npos) << msg;
  msg = error_of({}, {{"SLURM_PROCID", ""}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_NE(msg.find("SLURM_PROCID=\"\""), std::string::npos) << msg;
  msg = error_of({}, {{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}});
  EXPECT_NE(msg.find("SLURM_PROCID=-1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("negative"), std::string::npos) << msg;
  msg = error_of({}, {{"RANK", "0"}, {"WORLD_SIZE", "0"}});
  EXPECT_NE(msg.find("WORLD_SIZE=0"), std::string::npos) << msg;
  msg = error_of(RankFlags{-1, 2, std::nullopt}, {});
  EXPECT_NE(msg.find("--rank=-1"), std::string::npos) << msg;
  msg = error_of({}, {{"RANK", "99999999999"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(msg.find("RANK=\"99999999999\""), std::string::npos) << msg;
}

TEST(RankEnv, HalfGivenIsAnError) {
  EXPECT_NE(error_of({}, {{"RANK", "0"}}).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(error_of({}, {{"SLURM_PROCID", "0"}, {"SLURM_STEP_ID", "0"}}).find("SLURM_NTASKS"), std::string::npos);
  EXPECT_NE(error_of(RankFlags{1, std::nullopt, std::nullopt}, {}).find("--world-size"), std::string::npos);
  EXPECT_NE(error_of(RankFlags{std::nullopt, std::nullopt, 1}, {}).find("--local-rank"), std::string::npos);
}

TEST(RankDevice, GpuRanksTakeTheGpuOfTheirLocalRankAndCpuRanksStayOnTheCpu) {
  using lathe::dist::rank_device;
  using lathe::dist::RankInfo;
  const RankInfo r1{.rank = 3, .world_size = 4, .local_rank = 1, .source = "slurm"};
  EXPECT_EQ(rank_device("cuda", r1, 2).backend, "cuda");
  EXPECT_EQ(rank_device("cuda", r1, 2).device_index, 1);
  EXPECT_TRUE(rank_device("auto", r1, 2).gpu());  // auto with GPUs here: GPU ranks
  EXPECT_EQ(rank_device("auto", r1, 2).device_index, 1);
  EXPECT_EQ(rank_device("auto", r1, 0).backend, "auto");  // no GPU: CPU ranks, device 0
  EXPECT_EQ(rank_device("auto", r1, 0).device_index, 0);
  EXPECT_EQ(rank_device("cpu", r1, 8).backend, "cpu");  // asked for the CPU: GPUs are not used
  EXPECT_EQ(rank_device("reference", r1, 8).device_index, 0);
}

TEST(RankDevice, ALocalRankWithoutAGpuOfItsOwnIsAConfigErrorNamingTheKnob) {
  using lathe::dist::rank_device;
  const lathe::dist::RankInfo r{.rank = 1, .world_size = 2, .local_rank = 1, .source = "flags"};
  try {
    rank_device("cuda", r, 1);
    FAIL() << "two GPU ranks on a one-GPU machine must be refused";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("compute.devices"), std::string::npos) << m;
    EXPECT_NE(m.find("local rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("1 GPU(s)"), std::string::npos) << m;
  }
  EXPECT_THROW(rank_device("auto", r, 1), ConfigError);  // auto with a GPU: GPU ranks, same rule
}
