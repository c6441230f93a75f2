// A training run on the GPU measures device/mfu against its board's datasheet peak for the run's
// data type (resources/device_peaks.json by the CUDA device name): fp32 for an f32 run, the bf16
// tensor-core peak for a bf16 run with native kernels; the started event says which, and no MFU
// sample is above 1. A board the table lacks says so (peak_flops_how). Tiny random IDX data (the
// lent machine has no Fashion-MNIST). Label gpu: skipped with the reason without a device.
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "engine/core/rng.h"
#include "engine/run/device_peaks.h"
#include "engine/run/trainer.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

using gputest::CudaTest;
namespace fs = std::filesystem;

/// The started and precision events and every device/mfu sample of a run.
class PeakSink final : public MetricsSink {
 public:
  void sample(const std::string& metric, int64_t, double, double value) override {
    if (metric == "device/mfu")
      mfu.push_back(value);
  }
  void event(const std::string& kind, const nlohmann::json& fields) override {
    if (kind == "started" || kind == "precision")
      events[kind] = fields;
  }
  std::map<std::string, nlohmann::json> events;
  std::vector<double> mfu;
};

/// `n` random 28x28 images and labels as IDX files in `dir`: {images, labels}.
std::pair<std::string, std::string> write_idx(const fs::path& dir, const std::string& stem, int n, uint64_t seed) {
  const auto be32 = [](std::ofstream& f, uint32_t v) {
    for (int shift : {24, 16, 8, 0})
      f.put(static_cast<char>((v >> shift) & 0xff));
  };
  Rng rng(seed);
  const std::string images = (dir / (stem + "-images.idx")).string(), labels = (dir / (stem + "-labels.idx")).string();
  std::ofstream img(images, std::ios::binary), lab(labels, std::ios::binary);
  be32(img, 0x00000803);
  be32(img, n);
  be32(img, 28);
  be32(img, 28);
  be32(lab, 0x00000801);
  be32(lab, n);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 28 * 28; ++p)
      img.put(static_cast<char>(static_cast<int>(rng.uniform() * 255)));
    lab.put(static_cast<char>(i % 10));
  }
  return {images, labels};
}

class MfuPeakOnCuda : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped())
      return;
    m_dir = fs::temp_directory_path() / ("lathe_gpu_mfu_" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
    m_train = write_idx(m_dir, "train", 512, 1);
    m_test = write_idx(m_dir, "test", 128, 2);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  RunSummary run(const std::string& precision, PeakSink& sink) {
    RunOptions o;
    o.extra_sink = &sink;
    o.write_run_dir = false;
    return run_experiment(
        test::config_from({"model.zoo=mlp", "train.epochs=1", "train.batch_size=64", "compute.backend=cuda",
                           "train.precision=" + precision, "data.dataset=idx", "data.train_images=" + m_train.first,
                           "data.train_labels=" + m_train.second, "data.test_images=" + m_test.first,
                           "data.test_labels=" + m_test.second}),
        o);
  }
  /// Checks the started event against the table for `key`; the data type it should name is `dtype`.
  void expect_datasheet_peak(const PeakSink& sink, const std::string& key, const std::string& dtype) {
    ASSERT_TRUE(sink.events.count("started"));
    const nlohmann::json& started = sink.events.at("started");
    const std::string how = started.value("peak_flops_how", std::string());
    const DevicePeakTable table = DevicePeakTable::load(DevicePeakTable::default_path());
    const DevicePeaks* board = table.find(gpu().device_name());
    if (!board || board->peak(key) <= 0) {
      // Not in the table: it says so, and falls back to cost.instance (local: none).
      EXPECT_NE(how.find("unknown"), std::string::npos) << how;
      std::cout << "[ note ] " << gpu().device_name() << " has no " << key << " datasheet peak in " << table.path()
                << ": " << how << "\n";
      return;
    }
    EXPECT_EQ(how.rfind("datasheet (" + board->source + ") for " + board->model, 0), 0u) << how;
    EXPECT_DOUBLE_EQ(started.value("peak_flops_per_s", 0.0), board->peak(key));
    EXPECT_EQ(started.value("peak_flops_dtype", std::string()), dtype);
    ASSERT_FALSE(sink.mfu.empty()) << "a datasheet peak, but no device/mfu sample";
    for (double v : sink.mfu) {
      EXPECT_GE(v, 0.0);
      EXPECT_LE(v, 1.0);
    }
    std::cout << "[ note ] " << gpu().device_name() << " " << dtype << " run: peak " << board->peak(key) / 1e12
              << " TFLOP/s, last device/mfu " << sink.mfu.back() << "\n";
  }

  fs::path m_dir;
  std::pair<std::string, std::string> m_train, m_test;
};

TEST_F(MfuPeakOnCuda, AnF32RunIsMeasuredAgainstTheFp32DatasheetPeak) {
  PeakSink sink;
  const RunSummary s = run("fp32", sink);
  ASSERT_EQ(s.status, "finished");
  expect_datasheet_peak(sink, "fp32", "f32");
}

TEST_F(MfuPeakOnCuda, ABf16RunIsMeasuredAgainstTheBf16TensorCorePeak) {
  PeakSink sink;
  const RunSummary s = run("bf16", sink);
  ASSERT_EQ(s.status, "finished");
  ASSERT_TRUE(sink.events.count("precision"));
  const bool native = sink.events.at("precision").value("linear", std::string()) == "native";
  if (native)
    expect_datasheet_peak(sink, "bf16", "bf16");
  else  // emulated bf16 computes in f32: its peak is f32's
    expect_datasheet_peak(sink, "fp32", "f32");
}

}  // namespace
}  // namespace lathe
#endif  // LATHE_HAVE_CUDA
