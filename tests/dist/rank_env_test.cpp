// Rank discovery: flags, then Slurm, then torchrun, then 0 of 1; malformed values are ConfigErrors
// naming the variable and its value.
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
  auto info = discover_rank(
      {},
      env_of(
          {{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.source, "slurm");
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
  msg = error_of({}, {{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}});
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
  msg = error_of({}, {{"SLURM_PROCID", ""}, {"SLURM_NTASKS", "2"}});
  EXPECT_NE(msg.find("SLURM_PROCID=\"\""), std::string::npos) << msg;
  msg = error_of({}, {{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "2"}});
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
  EXPECT_NE(error_of({}, {{"SLURM_PROCID", "0"}}).find("SLURM_NTASKS"), std::string::npos);
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
