// Nvml loads libnvidia-ml at run time: where the library or a device is missing it reports why and
// answers every query with nothing (no crash, no throw); where it is present it reads sane values.
// Runs on every machine.
#include <gtest/gtest.h>

#include "engine/run/nvml.h"

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
