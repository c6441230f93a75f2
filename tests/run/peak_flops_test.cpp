// The roofline peak per data type: a rate a run achieved raises the recorded peak (never below a
// run), later peaks start from the record and say so, MFU is clamped to [0, 1], and a data type
// without a peak measurement is refused by name.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "engine/core/error.h"
#include "engine/run/telemetry.h"

namespace lathe {
namespace {

TEST(PeakFlops, AchievedRateRaisesTheRecordedPeakPerDataType) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lathe_peak_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);

  const PeakFlops start{100e9, "measured: test"};
  const PeakFlops same = raise_peak_to_achieved(start, 50e9, 1, DType::f32);
  EXPECT_EQ(same.flops_per_s, 100e9);  // a slower run leaves the peak alone
  EXPECT_EQ(same.how, start.how);
  const PeakFlops raised = raise_peak_to_achieved(start, 1e15, 1, DType::f32);
  EXPECT_EQ(raised.flops_per_s, 1e15);
  EXPECT_NE(raised.how.find("raised"), std::string::npos) << raised.how;
  // The next peak for f32 on 1 thread starts from the record, far above any SGEMM measured now.
  const PeakFlops next = cpu_peak_flops(1, DType::f32);
  EXPECT_EQ(next.flops_per_s, 1e15);
  EXPECT_NE(next.how.find("best recorded"), std::string::npos) << next.how;
  // The record is per data type and thread count: f32 on 2 threads is measured afresh.
  EXPECT_LT(cpu_peak_flops(2, DType::f32).flops_per_s, 1e15);

  if (old)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  std::filesystem::remove_all(dir);
}

TEST(PeakFlops, MfuIsClampedToOne) {
  EXPECT_DOUBLE_EQ(mfu_fraction(50, 200), 0.25);
  EXPECT_DOUBLE_EQ(mfu_fraction(300, 200), 1.0);
  EXPECT_DOUBLE_EQ(mfu_fraction(300, 0), 0.0);  // unknown peak
}

TEST(PeakFlops, RefusesADataTypeWithoutAPeakByName) {
  try {
    measure_cpu_peak_ops(1, DType::f16);
    FAIL() << "f16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: f32, bf16, s8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
