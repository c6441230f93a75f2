// default_direction: the one declared direction of every metric the engine logs (lower is better
// for sizes, times, money, losses and drops; higher for accuracy, rates, speedups and MFU).
// default_unit: the unit each of those names says its values are in.
#include <gtest/gtest.h>

#include "engine/store/store_types.h"

namespace lathe {
namespace {

TEST(MetricDirection, LowerIsBetterForCosts) {
  for (const char* m : {"train/loss",           "Test/LOSS",
                        "distill/kd_loss",      "model/bytes",
                        "model/int8_bytes",     "mem/peak_bytes",
                        "latency/dense/b1_ms",  "latency/pruned/b256_ms",
                        "quant/search/b256_ms", "cost/usd",
                        "model/params",         "model/flops_per_sample",
                        "prune/bytes_ratio",    "prune/flops_ratio",
                        "prune/params_ratio",   "quant/bytes_ratio",
                        "train/seconds",        "quant/calib_seconds",
                        "train/skipped_steps",  "prune/accuracy_drop_pt",
                        "quant/accuracy_drop",  "quant/search/f32_layers"})
    EXPECT_EQ(default_direction(m), Direction::minimize) << m;
}

TEST(MetricDirection, HigherIsBetterForQualityAndRates) {
  for (const char* m :
       {"test/accuracy", "train/accuracy", "pruned/test_accuracy", "quant/test_accuracy", "distill/teacher_accuracy",
        "train/samples_per_s", "throughput/dense/b1_samples_per_s", "throughput/int8/b256_samples_per_s",
        "quant/speedup_b1", "prune/speedup_b256", "device/mfu", "device/util", "quant/mixed/goal_met"})
    EXPECT_EQ(default_direction(m), Direction::maximize) << m;
}

TEST(MetricUnit, EachLoggedNameSaysItsUnit) {
  const std::pair<const char*, const char*> cases[] = {
      {"train/samples_per_s", "samples/s"},
      {"throughput/int8/b256_samples_per_s", "samples/s"},
      {"dist/rank1/samples_per_s", "samples/s"},
      {"cost/usd", "USD"},
      {"cost/usd_on_demand", "USD"},
      {"lowrank/weight_bytes_ratio", "ratio"},  // a ratio of bytes, not bytes
      {"prune/flops_ratio", "ratio"},
      {"dist/bytes_per_step", "bytes/step"},
      {"model/bytes", "bytes"},
      {"mem/optimizer_bytes", "bytes"},
      {"dist/rank0/optimizer_bytes", "bytes"},
      {"latency/int8/b1_spread_pct", "%"},
      {"prune/accuracy_drop_pt", "points"},  // percentage points, not a fraction
      {"latency/dense/b256_ms", "ms"},
      {"device/power_w", "W"},
      {"device/sm_clock_mhz", "MHz"},
      {"dist/comm_s", "s"},
      {"ckpt/write_s", "s"},
      {"spot/seconds_redone", "s"},
      {"model/flops_per_sample", "FLOP/sample"},
      {"quant/speedup_b1", "x"},
      {"test/accuracy", "fraction"},
      {"Pruned/Test_Accuracy", "fraction"},
      {"device/util", "fraction"},
      {"device/mfu", "fraction"},
      {"dist/comm_fraction", "fraction"},
      {"device/dram_bw_util", "fraction"},
      {"device/sm_activity", "fraction"},
      {"prune/sparsity/fc1.weight", "fraction"},
      {"latency/int8/b1_others_cpu_share", "fraction"},
      {"train/loss", ""},
      {"train/lr", ""},
      {"dist/world_size", ""},
      {"model/params", ""},
      {"lowrank/rank/fc1", ""},
  };
  for (const auto& [metric, unit] : cases)
    EXPECT_EQ(default_unit(metric), unit) << metric;
}

TEST(MetricUnit, AnAxisLabelAddsTheUnitOnlyWhereThereIsOne) {
  EXPECT_EQ(metric_label("train/samples_per_s"), "train/samples_per_s (samples/s)");
  EXPECT_EQ(metric_label("cost/usd"), "cost/usd (USD)");
  EXPECT_EQ(metric_label("train/loss"), "train/loss");
  EXPECT_EQ(metric_label(""), "");
}

}  // namespace
}  // namespace lathe
