// The Slurm resources of a sweep (engine/run/slurm_options.h), checked once for lathe-cli sweep
// --slurm and the GUI's sweep dialog: Slurm's time-limit forms, refusals naming the option, and
// the lathe-cli options built from them.
#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/run/slurm_options.h"

namespace lathe {
namespace {

std::string refusal(const SlurmResources& r) {
  try {
    check_slurm_resources(r);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

SlurmResources good() {
  SlurmResources r;
  r.out = "/shared/sweep";
  return r;
}

TEST(SlurmOptions, TimeLimitFormsOfSlurm) {
  for (const char* t : {"30", "45:00", "2:00:00", "1-12", "1-12:30", "1-12:30:15", "UNLIMITED", "INFINITE", "0"})
    EXPECT_TRUE(is_slurm_time(t)) << t;
  for (const char* t : {"", "ten", "30m", "1:2:3:4", "1-", "-5", "1-2-3", "1:", ":30", "1::2", "1.5", "2h",
                        "1-1:2:3:4", "12 00"})
    EXPECT_FALSE(is_slurm_time(t)) << t;
}

TEST(SlurmOptions, RefusesNamingTheOption) {
  EXPECT_EQ(refusal(good()), "");
  SlurmResources r = good();
  r.out.clear();
  EXPECT_NE(refusal(r).find("--out: missing"), std::string::npos) << refusal(r);
  r = good();
  r.out = "/shared/my sweep";
  EXPECT_NE(refusal(r).find("--out '/shared/my sweep'"), std::string::npos) << refusal(r);
  r = good();
  r.partition = "gpu 'a'";
  EXPECT_NE(refusal(r).find("--partition"), std::string::npos) << refusal(r);
  r = good();
  r.time = "ten minutes";
  EXPECT_NE(refusal(r).find("--time 'ten minutes': allowed: Slurm's time limit"), std::string::npos) << refusal(r);
  r = good();
  r.gpus = -2;
  EXPECT_NE(refusal(r).find("--gpus -2: allowed: 0 to 64"), std::string::npos) << refusal(r);
  r = good();
  r.gpus = 65;
  EXPECT_NE(refusal(r).find("--gpus 65"), std::string::npos);
  r = good();
  r.cpus = 0;
  EXPECT_NE(refusal(r).find("--cpus 0: allowed: 1 to"), std::string::npos) << refusal(r);
  r = good();
  r.gpus = 0;
  r.cpus = 4;
  r.time = "1-00:30";
  r.partition = "debug";
  EXPECT_EQ(refusal(r), "");
}

TEST(SlurmOptions, CliArgumentsLeaveDefaultsOut) {
  SlurmResources r = good();
  EXPECT_EQ(slurm_cli_args(r), (std::vector<std::string>{"--slurm", "--out", "/shared/sweep"}));
  r.partition = "debug";
  r.time = "10:00";
  r.gpus = 0;
  r.cpus = 2;
  EXPECT_EQ(slurm_cli_args(r), (std::vector<std::string>{"--slurm", "--out", "/shared/sweep", "--partition", "debug",
                                                         "--time", "10:00", "--gpus", "0", "--cpus", "2"}));
}

}  // namespace
}  // namespace lathe
