// GPU telemetry (engine/run/gpu_sampler.h, issue 15 item 9) without a GPU: the GPU-Util / SM
// activity warning rule, what a reading logs (and that the warning is logged once, with both
// figures), and a sampler whose NVML is missing starting and stopping with nothing read.
#include "engine/run/gpu_sampler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "engine/core/error.h"

namespace lathe {
namespace {

struct LastValueSink final : MetricsSink {
  std::map<std::string, double> last;
  std::vector<std::pair<std::string, nlohmann::json>> events;
  void sample(const std::string& metric, int64_t, double, double value) override { last[metric] = value; }
  void event(const std::string& kind, const nlohmann::json& fields) override { events.emplace_back(kind, fields); }
};

TEST(UtilDivergence, WarnsOnlyWhenGpuUtilIsHighAndSmActivityUnderHalfOfIt) {
  EXPECT_FALSE(util_divergence(0.97, 0.90));  // they agree
  EXPECT_FALSE(util_divergence(0.40, 0.05));  // GPU-Util itself low: nothing overstated
  EXPECT_FALSE(util_divergence(0.80, 0.40));  // exactly half: not under it
  EXPECT_TRUE(util_divergence(0.80, 0.39));
  EXPECT_FALSE(util_divergence(NAN, 0.1));
  EXPECT_FALSE(util_divergence(0.9, NAN));
  const std::optional<std::string> w = util_divergence(0.97, 0.12);
  ASSERT_TRUE(w);
  EXPECT_NE(w->find("97%"), std::string::npos) << *w;
  EXPECT_NE(w->find("12%"), std::string::npos) << *w;
}

TEST(LogGpuReading, LogsNvmlAndGpmFiguresAndWarnsOnce) {
  LastValueSink sink;
  bool warned = false;
  GpuReading r;
  r.nvml.util_percent = 95;
  r.nvml.power_w = 312.5;
  log_gpu_reading(sink, 10, 1000, r, warned);  // no GPM, no clock: those metrics are absent
  EXPECT_DOUBLE_EQ(sink.last.at("device/util"), 0.95);
  EXPECT_DOUBLE_EQ(sink.last.at("device/power_w"), 312.5);
  EXPECT_EQ(sink.last.count("device/sm_clock_mhz"), 0u);
  EXPECT_EQ(sink.last.count("device/sm_activity"), 0u);
  EXPECT_TRUE(sink.events.empty());

  r.nvml.sm_clock_mhz = 1980;
  r.gpm = GpmReading{0.10, 0.07, 0.0, 0.31};
  log_gpu_reading(sink, 20, 2000, r, warned);
  EXPECT_DOUBLE_EQ(sink.last.at("device/sm_clock_mhz"), 1980);
  EXPECT_DOUBLE_EQ(sink.last.at("device/sm_activity"), 0.10);
  EXPECT_DOUBLE_EQ(sink.last.at("device/sm_occupancy"), 0.07);
  EXPECT_DOUBLE_EQ(sink.last.at("device/tensor_activity"), 0.0);
  EXPECT_DOUBLE_EQ(sink.last.at("device/dram_bw_util"), 0.31);
  ASSERT_EQ(sink.events.size(), 1u);
  EXPECT_EQ(sink.events[0].first, "device/warning");
  EXPECT_EQ(sink.events[0].second.at("step"), 20);
  EXPECT_DOUBLE_EQ(sink.events[0].second.at("gpu_util").get<double>(), 0.95);
  EXPECT_DOUBLE_EQ(sink.events[0].second.at("sm_activity").get<double>(), 0.10);
  EXPECT_TRUE(warned);
  log_gpu_reading(sink, 30, 3000, r, warned);  // still diverging: not warned again
  EXPECT_EQ(sink.events.size(), 1u);
}

TEST(GpuSampler, WithoutNvmlReadsNothingAndSaysWhyGpmIsMissing) {
  if (Nvml::instance().available())
    GTEST_SKIP() << "NVML is available here: the GPU suite checks real readings";
  {
    GpuSampler sampler(0, 0.01);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(sampler.latest().has_value());
    EXPECT_FALSE(sampler.gpm_unavailable_reason().empty());
  }
  EXPECT_THROW(GpuSampler(0, 0), Error);
  GpmMeter gpm(0);
  EXPECT_FALSE(gpm.supported());
  EXPECT_FALSE(gpm.sample().has_value());
}

}  // namespace
}  // namespace lathe
