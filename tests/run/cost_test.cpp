// The price catalog in resources/prices.json and the cost arithmetic, checked against hand-computed
// dollars; malformed catalogs and unknown instances must fail with messages that help.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/run/cost_model.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("lathe_cost_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

PriceCatalog seeded() { return PriceCatalog::load(LATHE_SOURCE_DIR "/resources/prices.json"); }

TEST(PriceCatalog, SeededInstancesArePresentWithDateAndSource) {
  const PriceCatalog c = seeded();
  for (const char* name : {"local", "g4dn.xlarge", "p3.2xlarge", "p4d.24xlarge", "p5.48xlarge"}) {
    ASSERT_TRUE(c.contains(name)) << name;
    const InstancePrice& p = c.find(name);
    EXPECT_FALSE(p.price_date.empty()) << name;
    EXPECT_FALSE(p.source.empty()) << name;
    EXPECT_FALSE(p.spot_source.empty()) << name;
    EXPECT_LE(p.spot_usd_per_hour, p.on_demand_usd_per_hour) << name;
    if (!p.peak_flops_per_device.empty())
      EXPECT_FALSE(p.peak_flops_source.empty()) << name;
  }
  EXPECT_EQ(c.find("local").source, "your own machine");
  EXPECT_EQ(c.find("local").on_demand_usd_per_hour, 0.0);
  EXPECT_EQ(c.find("p4d.24xlarge").gpus, 8);
  EXPECT_DOUBLE_EQ(c.find("p4d.24xlarge").on_demand_usd_per_hour, 32.7726);
  EXPECT_DOUBLE_EQ(c.find("p5.48xlarge").on_demand_usd_per_hour, 98.32);
  EXPECT_DOUBLE_EQ(c.find("p3.2xlarge").on_demand_usd_per_hour, 3.06);
  EXPECT_DOUBLE_EQ(c.find("g4dn.xlarge").on_demand_usd_per_hour, 0.526);
  EXPECT_EQ(c.find("g4dn.xlarge").gpus, 1);
}

TEST(PriceCatalog, PeakFlopsAreVendorDatasheetValues) {
  const PriceCatalog c = seeded();
  EXPECT_DOUBLE_EQ(c.find("p4d.24xlarge").peak_flops("fp32"), 19.5e12);
  EXPECT_DOUBLE_EQ(c.find("p4d.24xlarge").peak_flops("tf32"), 156e12);
  EXPECT_DOUBLE_EQ(c.find("p4d.24xlarge").peak_flops("bf16"), 312e12);
  EXPECT_DOUBLE_EQ(c.find("p5.48xlarge").peak_flops("fp32"), 67e12);
  EXPECT_DOUBLE_EQ(c.find("p5.48xlarge").peak_flops("bf16"), 989e12);
  EXPECT_DOUBLE_EQ(c.find("p3.2xlarge").peak_flops("fp32"), 15.7e12);
  EXPECT_DOUBLE_EQ(c.find("g4dn.xlarge").peak_flops("fp32"), 8.1e12);
  EXPECT_EQ(c.find("p3.2xlarge").peak_flops("bf16"), 0.0);  // V100 has no bf16: unknown, not invented
  EXPECT_EQ(c.find("local").peak_flops("fp32"), 0.0);
}

TEST(CostModel, HandComputedDollars) {
  const PriceCatalog c = seeded();
  // 30 min of one V100 on demand: 3.06 / 2.
  EXPECT_NEAR(cost_usd(c.find("p3.2xlarge"), false, 1, 1800), 1.53, 1e-12);
  // One p4d hour with all 8 GPUs, and with 1 GPU: the whole instance is billed either way.
  EXPECT_NEAR(cost_usd(c.find("p4d.24xlarge"), false, 8, 3600), 32.7726, 1e-12);
  EXPECT_NEAR(cost_usd(c.find("p4d.24xlarge"), false, 1, 3600), 32.7726, 1e-12);
  // 9 ranks need two 8-GPU instances.
  EXPECT_EQ(instances_needed(c.find("p4d.24xlarge"), 9), 2);
  EXPECT_NEAR(cost_usd(c.find("p4d.24xlarge"), false, 9, 3600), 65.5452, 1e-12);
  // Spot for 15 minutes: 10.5 / 4.
  EXPECT_NEAR(cost_usd(c.find("p4d.24xlarge"), true, 2, 900), 2.625, 1e-12);
  // Three single-GPU T4 instances for 2 hours: 0.526 * 3 * 2.
  EXPECT_EQ(instances_needed(c.find("g4dn.xlarge"), 3), 3);
  EXPECT_NEAR(cost_usd(c.find("g4dn.xlarge"), false, 3, 7200), 3.156, 1e-12);
  EXPECT_EQ(cost_usd(c.find("local"), false, 4, 1e6), 0.0);
  EXPECT_EQ(instances_needed(c.find("local"), 4), 1);
  EXPECT_EQ(cost_usd(c.find("p5.48xlarge"), false, 8, 0), 0.0);
  EXPECT_THROW(cost_usd(c.find("p3.2xlarge"), false, 0, 10), Error);
  EXPECT_THROW(cost_usd(c.find("p3.2xlarge"), false, 1, -1), Error);
}

// A run's dollars are a projection when the priced instance's GPUs are not what it trained on.
TEST(CostModel, APriceOfAnotherDeviceIsAProjectionThatNamesBoth) {
  const PriceCatalog c = seeded();
  const std::string cpu = cost_projection_reason(c.find("g4dn.xlarge"), "Intel(R) Xeon(R) Processor", false);
  EXPECT_NE(cpu.find("Intel(R) Xeon(R) Processor (CPU)"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("g4dn.xlarge"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("NVIDIA T4 16GB"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("projection"), std::string::npos) << cpu;
  // A GPU of the instance's model (device names as CUDA gives them) is what the price is for.
  EXPECT_EQ(cost_projection_reason(c.find("p5.48xlarge"), "NVIDIA H100 80GB HBM3", true), "");
  EXPECT_EQ(cost_projection_reason(c.find("p4d.24xlarge"), "NVIDIA A100-SXM4-40GB", true), "");
  EXPECT_EQ(cost_projection_reason(c.find("g4dn.xlarge"), "Tesla T4", true), "");
  // Another GPU model is a projection too: an H200 priced as a p5's H100.
  EXPECT_NE(cost_projection_reason(c.find("p5.48xlarge"), "NVIDIA H200", true).find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(cost_projection_reason(c.find("p3.2xlarge"), "NVIDIA A100-SXM4-40GB", true), "");
  // The same chip on another board is not the instance's GPU: an H100 PCIe or NVL under a p5's SXM5,
  // an 80GB A100 under a p4d's 40GB one (gpu_cuda_name, whole names). A MIG slice of the instance's
  // own GPU is on that instance.
  for (const char* other : {"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H100 PCIe MIG 1g.10gb"})
    EXPECT_NE(cost_projection_reason(c.find("p5.48xlarge"), other, true).find(other), std::string::npos) << other;
  EXPECT_NE(cost_projection_reason(c.find("p4d.24xlarge"), "NVIDIA A100-SXM4-80GB", true), "");
  EXPECT_EQ(cost_projection_reason(c.find("p5.48xlarge"), "nvidia h100 80gb hbm3 ", true), "");
  EXPECT_EQ(cost_projection_reason(c.find("p5.48xlarge"), "NVIDIA H100 80GB HBM3 MIG 3g.40gb", true), "");
  // A catalog entry without gpu_cuda_name (a user's own) keeps the short-name rule.
  InstancePrice mine = c.find("p5.48xlarge");
  mine.gpu_cuda_name.clear();
  EXPECT_EQ(cost_projection_reason(mine, "NVIDIA H100 PCIe", true), "");
  EXPECT_NE(cost_projection_reason(mine, "NVIDIA A100-SXM4-40GB", true), "");
  // No price or no GPUs: nothing is projected (the local machine costs $0, as measured).
  EXPECT_EQ(cost_projection_reason(c.find("local"), "Intel(R) Xeon(R) Processor", false), "");
}

TEST(PriceCatalog, UnknownInstanceListsTheNames) {
  const PriceCatalog c = seeded();
  try {
    c.find("p9.huge");
    FAIL() << "found an instance that does not exist";
  } catch (const ConfigError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("p9.huge"), std::string::npos) << msg;
    for (const std::string& name : c.names())
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  EXPECT_EQ(c.names().front(), "local");
  EXPECT_EQ(c.names().size(), c.instances().size());
}

TEST(PriceCatalog, DefaultPathHonoursLathePrices) {
  const char* was = std::getenv("LATHE_PRICES");
  const std::string saved = was ? was : "";
  ::unsetenv("LATHE_PRICES");
  EXPECT_EQ(PriceCatalog::default_path(), LATHE_SOURCE_DIR "/resources/prices.json");
  ::setenv("LATHE_PRICES", "/somewhere/else.json", 1);
  EXPECT_EQ(PriceCatalog::default_path(), "/somewhere/else.json");
  if (was)
    ::setenv("LATHE_PRICES", saved.c_str(), 1);
  else
    ::unsetenv("LATHE_PRICES");
}

TEST(PriceCatalog, MalformedCatalogsAreRejected) {
  const std::string entry_ok =
      R"({"name":"x","gpus":1,"gpu_model":"g","on_demand_usd_per_hour":1,"spot_usd_per_hour":0.5,)"
      R"("price_date":"2024-12","source":"s"})";
  const std::string good = write_temp("good.json", R"({"instances":[)" + entry_ok + "]}");
  EXPECT_NO_THROW(PriceCatalog::load(good));

  auto expect_bad = [](const std::string& name, const std::string& text, const std::string& needle) {
    const std::string path = write_temp(name, text);
    try {
      PriceCatalog::load(path);
      ADD_FAILURE() << "accepted " << text;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    fs::remove(path);
  };
  expect_bad("syntax.json", "{\"instances\": [", "not valid JSON");
  expect_bad("noarray.json", "{\"instances\": 3}", "\"instances\" array");
  expect_bad("empty.json", "{\"instances\": []}", "no instances");
  expect_bad("nosource.json",
             R"({"instances":[{"name":"x","gpus":1,"gpu_model":"g","on_demand_usd_per_hour":1,)"
             R"("spot_usd_per_hour":0.5,"price_date":"2024-12"}]})",
             "missing \"source\"");
  expect_bad("negative.json",
             R"({"instances":[{"name":"x","gpus":1,"gpu_model":"g","on_demand_usd_per_hour":-1,)"
             R"("spot_usd_per_hour":0.5,"price_date":"2024-12","source":"s"}]})",
             "on_demand_usd_per_hour");
  expect_bad("twice.json", R"({"instances":[)" + entry_ok + "," + entry_ok + "]}", "listed twice");
  expect_bad("eur.json", R"({"currency":"EUR","instances":[)" + entry_ok + "]}", "USD");
  // Older figures: each needs a date, a source and at least one price.
  const std::string with_history = entry_ok.substr(0, entry_ok.size() - 1);
  expect_bad("history-noprice.json",
             R"({"instances":[)" + with_history + R"(,"history":[{"date":"2023","source":"s"}]}]})", "gives no price");
  expect_bad("history-nodate.json",
             R"({"instances":[)" + with_history + R"(,"history":[{"source":"s","spot_usd_per_hour":1}]}]})",
             "missing \"date\"");
  const std::string past = write_temp(
      "history.json", R"({"instances":[)" + with_history +
                          R"(,"history":[{"date":"2023-01","source":"old list","on_demand_usd_per_hour":2}]}]})");
  const PriceCatalog c = PriceCatalog::load(past);
  ASSERT_EQ(c.find("x").history.size(), 1u);
  EXPECT_EQ(c.find("x").history[0].on_demand_usd_per_hour, 2.0);
  EXPECT_EQ(c.find("x").history[0].spot_usd_per_hour, -1.0);  // not given
  fs::remove(past);
  EXPECT_THROW(PriceCatalog::load("/no/such/prices.json"), DataError);
  fs::remove(good);
}

}  // namespace
}  // namespace lathe
