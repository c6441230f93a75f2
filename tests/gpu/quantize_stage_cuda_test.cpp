// The quantize stage on a CUDA backend (tiny Fashion-MNIST runs): static PTQ evaluates and times
// INT8 on the GPU, ptq-dynamic runs it on the CPU from a host copy, and a quant/device event says
// which device ran INT8 and why. Label gpu: skipped with the reason without a device (or dataset).
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/data/dataset.h"
#include "engine/run/trainer.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

using gputest::CudaTest;

/// Collects the events of a run.
class EventSink final : public MetricsSink {
 public:
  void sample(const std::string&, int64_t, double, double) override {}
  void event(const std::string& kind, const nlohmann::json& fields) override { events.emplace_back(kind, fields); }
  const nlohmann::json* find(const std::string& kind) const {
    for (const auto& [k, f] : events)
      if (k == kind)
        return &f;
    return nullptr;
  }
  std::vector<std::pair<std::string, nlohmann::json>> events;
};

class QuantizeStageOnCuda : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped())
      return;
    if (!std::filesystem::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  }
  RunSummary run(const std::vector<std::string>& extra, EventSink& events) {
    std::vector<std::string> s{"model.zoo=cnn",           "train.epochs=1",           "data.train_subset=512",
                               "data.test_subset=300",    "train.batch_size=64",      "compute.backend=cuda",
                               "quant.calib_samples=128", "quant.calib_batch_size=32"};
    s.insert(s.end(), extra.begin(), extra.end());
    RunOptions o;
    o.extra_sink = &events;
    o.write_run_dir = false;
    return run_experiment(test::config_from(s), o);
  }
};

TEST_F(QuantizeStageOnCuda, StaticPtqRunsInt8OnTheGpu) {
  EventSink ev;
  const RunSummary s = run({"quant.mode=ptq-static"}, ev);
  ASSERT_EQ(s.status, "finished");
  const auto& m = s.final_metrics;
  for (const char* k :
       {"quant/test_accuracy", "latency/int8/b256_ms", "throughput/int8/b256_samples_per_s", "quant/speedup_b256"})
    EXPECT_TRUE(m.count(k)) << "missing " << k;
  EXPECT_NEAR(m.at("quant/test_accuracy"), m.at("quant/f32_test_accuracy"), 0.03);
  const nlohmann::json* d = ev.find("quant/device");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->at("int8_device"), gpu().device_name());
  EXPECT_FALSE(d->contains("cpu_reason"));
}

TEST_F(QuantizeStageOnCuda, DynamicRunsInt8OnTheCpuAndSaysWhy) {
  EventSink ev;
  const RunSummary s = run({"quant.mode=ptq-dynamic"}, ev);
  ASSERT_EQ(s.status, "finished");
  EXPECT_NEAR(s.final_metrics.at("quant/test_accuracy"), s.final_metrics.at("quant/f32_test_accuracy"), 0.03);
  const nlohmann::json* d = ev.find("quant/device");
  ASSERT_TRUE(d);
  EXPECT_NE(d->at("cpu_reason").get<std::string>().find("ptq-dynamic"), std::string::npos);
}

TEST_F(QuantizeStageOnCuda, MixedPrecisionRunsInt8OnTheCpuAndQatIsRefused) {
  EventSink ev;
  const RunSummary s = run({"quant.mode=ptq-static", "quant.mixed_precision=true"}, ev);
  ASSERT_EQ(s.status, "finished");
  EXPECT_TRUE(s.final_metrics.count("quant/mixed/points"));
  const nlohmann::json* d = ev.find("quant/device");
  ASSERT_TRUE(d);
  EXPECT_NE(d->at("cpu_reason").get<std::string>().find("mixed_precision"), std::string::npos);
  EventSink none;
  EXPECT_THROW(run({"quant.mode=qat"}, none), ConfigError);  // fake quantization is host-only
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
