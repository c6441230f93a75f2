// The scaling projection (engine/dist/scaling_model.h) against values worked out by hand from its
// formula: ring all-reduce 2(N-1)/N x bytes / bus bandwidth + 2(N-1) hop latencies, the hidden
// share taken off, throughput N x batch / step; a metric's steady value is the median after the
// first sample. Bad inputs are refused naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/core/error.h"
#include "engine/dist/scaling_model.h"

namespace lathe::dist {
namespace {

TEST(ScalingModel, RingAllReduceMovesTwiceNMinusOneOverNOfTheBytes) {
  // 100 MB over 100 GB/s: 1 ms of payload; 4 ranks send 2 x 3/4 of it, plus 6 hops of 10 us.
  EXPECT_NEAR(ring_allreduce_s(100e6, 4, 100e9, 10e-6), 1.5e-3 + 6e-5, 1e-12);
  EXPECT_NEAR(ring_allreduce_s(100e6, 2, 100e9, 0), 1e-3, 1e-12);
  EXPECT_NEAR(ring_allreduce_s(100e6, 1000, 100e9, 0), 2e-3 * 999 / 1000, 1e-12);  // tends to 2 x bytes / bw
  EXPECT_EQ(ring_allreduce_s(100e6, 1, 100e9, 10e-6), 0);                          // one rank sends nothing
}

TEST(ScalingModel, SteadyValueIsTheMedianAfterTheFirstSample) {
  // The warm-up sample (first) and a disturbed last one do not move it.
  EXPECT_EQ(steady_value({50, 1000, 990, 1010, 1005, 10}), 1000);  // median of {1000,990,1010,1005,10}
  EXPECT_EQ(steady_value({50, 1000, 990, 1010, 10}), 995);         // even count: the middle two's mean
  EXPECT_EQ(steady_value({50, 7}), 7);
  EXPECT_EQ(steady_value({42}), 42);  // the only sample
  EXPECT_TRUE(std::isnan(steady_value({})));
}

TEST(ScalingModel, ProjectionAddsTheUnhiddenAllReduceToTheStep) {
  ScalingInputs in;
  in.compute_s = 0.010;
  in.batch_per_rank = 64;
  in.grad_bytes = 100e6;
  in.bus_bytes_per_s = 100e9;
  in.hop_latency_s = 10e-6;
  in.hidden_fraction = 0.5;
  const auto pts = project_scaling(in, std::vector<int>{1, 4});
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].step_s, 0.010);
  EXPECT_NEAR(pts[0].samples_per_s, 6400, 1e-9);
  EXPECT_EQ(pts[0].efficiency, 1);
  // 4 ranks: all-reduce 1.56 ms, half hidden -> 0.78 ms exposed, step 10.78 ms, 256 samples.
  EXPECT_NEAR(pts[1].allreduce_s, 1.56e-3, 1e-12);
  EXPECT_NEAR(pts[1].exposed_s, 0.78e-3, 1e-12);
  EXPECT_NEAR(pts[1].step_s, 0.01078, 1e-12);
  EXPECT_NEAR(pts[1].samples_per_s, 256 / 0.01078, 1e-6);
  EXPECT_NEAR(pts[1].efficiency, 0.010 / 0.01078, 1e-12);
}

TEST(ScalingModel, HiddenFractionFittedFromAMeasuredRunRoundTrips) {
  EXPECT_NEAR(fitted_hidden_fraction(0.78e-3, 100e6, 4, 100e9, 10e-6), 0.5, 1e-9);
  EXPECT_EQ(fitted_hidden_fraction(0, 100e6, 4, 100e9, 0), 1);     // nothing exposed: all hidden
  EXPECT_EQ(fitted_hidden_fraction(5e-3, 100e6, 4, 100e9, 0), 0);  // slower than the model's link: none
  EXPECT_THROW(fitted_hidden_fraction(1e-3, 100e6, 1, 100e9, 0), ConfigError);
}

TEST(ScalingModel, BadInputsAreRefusedNamingThem) {
  ScalingInputs in;
  in.compute_s = 0.01;
  in.batch_per_rank = 64;
  in.grad_bytes = 1e6;
  in.bus_bytes_per_s = 1e9;
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message([&] { ring_allreduce_s(1e6, 2, 0, 0); }).find("bus bandwidth"), std::string::npos);
  EXPECT_NE(message([&] { ring_allreduce_s(1e6, 2, 1e9, -1); }).find("hop latency"), std::string::npos);
  EXPECT_NE(message([&] { ring_allreduce_s(1e6, 0, 1e9, 0); }).find("ranks = 0"), std::string::npos);
  ScalingInputs bad = in;
  bad.compute_s = 0;
  EXPECT_NE(message([&] { project_scaling(bad, 2); }).find("compute time"), std::string::npos);
  bad = in;
  bad.hidden_fraction = 1.5;
  EXPECT_NE(message([&] { project_scaling(bad, 2); }).find("hidden fraction"), std::string::npos);
  bad = in;
  bad.batch_per_rank = 0;
  EXPECT_NE(message([&] { project_scaling(bad, 2); }).find("batch per rank"), std::string::npos);
}

}  // namespace
}  // namespace lathe::dist
