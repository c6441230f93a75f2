// default_direction: the one declared direction of every metric the engine logs (lower is better
// for sizes, times, money, losses and drops; higher for accuracy, rates, speedups and MFU).
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

}  // namespace
}  // namespace lathe
