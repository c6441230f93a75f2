// Nvml loads libnvidia-ml at run time: where the library or a device is missing it reports why and
// answers every query with nothing (no crash, no throw); where it is present it reads sane values.
// Runs on every machine.
#include <gtest/gtest.h>

#include "engine/run/nvml.h"

#include <chrono>
#include <cmath>
#include <thread>

namespace lathe {
namespace {

TEST(Nvml, ReportsAvailabilityCleanly) {
  const Nvml& nvml = Nvml::instance();
  EXPECT_EQ(&nvml, &Nvml::instance());
  if (!nvml.available()) {
    EXPECT_FALSE(nvml.why_unavailable().empty());
    EXPECT_EQ(nvml.device_count(), 0);
    EXPECT_FALSE(nvml.sample(0).has_value());
    EXPECT_EQ(nvml.device_name(0), "");
    return;
  }
  EXPECT_TRUE(nvml.why_unavailable().empty());
  ASSERT_GE(nvml.device_count(), 1);
  const auto s = nvml.sample(0);
  ASSERT_TRUE(s.has_value());
  EXPECT_GE(s->util_percent, 0.0);
  EXPECT_LE(s->util_percent, 100.0);
  EXPECT_GT(s->mem_total_bytes, 0u);
  EXPECT_LE(s->mem_used_bytes, s->mem_total_bytes);
  EXPECT_FALSE(nvml.device_name(0).empty());
}

TEST(Nvml, OutOfRangeDevicesGiveNothing) {
  const Nvml& nvml = Nvml::instance();
  EXPECT_FALSE(nvml.sample(-1).has_value());
  EXPECT_FALSE(nvml.sample(100000).has_value());
  EXPECT_EQ(nvml.device_name(100000), "");
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

// Issue 15 item 9: where the GPU has GPM (Hopper and newer), two samples a moment apart give each
// metric as a fraction in [0, 1]; elsewhere GpmMeter says why, and power/clock are real numbers
// where NVML reports them.
TEST(NvmlGpm, ReadsFractionsWhereSupportedAndSaysWhyElsewhere) {
  if (!Nvml::instance().available() || Nvml::instance().device_count() == 0)
    GTEST_SKIP() << "no NVML device: " << Nvml::instance().why_unavailable();
  const auto s = Nvml::instance().sample(0);
  ASSERT_TRUE(s.has_value());
  if (!std::isnan(s->power_w))
    EXPECT_GT(s->power_w, 0.0);
  if (!std::isnan(s->sm_clock_mhz))
    EXPECT_GT(s->sm_clock_mhz, 0.0);
  GpmMeter gpm(0);
  if (!gpm.supported()) {
    EXPECT_FALSE(gpm.why_unsupported().empty());
    GTEST_SKIP() << "no GPM on this GPU: " << gpm.why_unsupported();
  }
  EXPECT_FALSE(gpm.sample().has_value());  // the first sample opens the window
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::optional<GpmReading> r = gpm.sample();
  ASSERT_TRUE(r.has_value());
  for (double v : {r->sm_activity, r->sm_occupancy, r->tensor_activity, r->dram_bw_util}) {
    EXPECT_GE(v, 0.0);
    EXPECT_LE(v, 1.0);
  }
}

}  // namespace
}  // namespace lathe
