// The GPU datasheet table (resources/device_peaks.json) and the choice of a GPU run's MFU peak: real
// CUDA device names find their board (PCIe and SXM apart, an NVL board not taken for the SXM one),
// a bf16/f16 run is measured against that type's tensor-core peak, an unknown device falls back to
// cost.instance's catalog peak (and says so), and malformed tables are rejected naming the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "engine/core/error.h"
#include "engine/run/cost_model.h"
#include "engine/run/device_peaks.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

std::string write_peaks_temp(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("lathe_peaks_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p.string();
}

const DevicePeakTable& seeded_peaks() {
  static const DevicePeakTable t = DevicePeakTable::load(LATHE_SOURCE_DIR "/resources/device_peaks.json");
  return t;
}
const PriceCatalog& seeded_prices() {
  static const PriceCatalog c = PriceCatalog::load(LATHE_SOURCE_DIR "/resources/prices.json");
  return c;
}
bool contains_text(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(DevicePeakTable, EveryEntryHasAnFp32PeakAndASource) {
  ASSERT_GE(seeded_peaks().devices().size(), 9u);
  for (const DevicePeaks& d : seeded_peaks().devices()) {
    EXPECT_FALSE(d.source.empty()) << d.model;
    EXPECT_TRUE(contains_text(d.source, "datasheet")) << d.model << ": " << d.source;
    EXPECT_GT(d.peak("fp32"), 0) << d.model;
    // Tensor-core peaks are far above the CUDA-core fp32 one wherever the datasheet gives them.
    for (const char* key : {"tf32", "bf16", "fp16", "int8"})
      if (d.peak(key) > 0)
        EXPECT_GT(d.peak(key), d.peak("fp32")) << d.model << " " << key;
  }
}

TEST(DevicePeakTable, RealCudaDeviceNamesFindTheirBoard) {
  const DevicePeakTable& t = seeded_peaks();
  const std::pair<const char*, const char*> names[] = {
      {"NVIDIA H200", "NVIDIA H200 SXM 141GB"},
      {"NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"},
      {"NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB"},
      {"NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 (40GB and 80GB)"},
      {"NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 (40GB and 80GB)"},
      {"NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe (40GB and 80GB)"},
      {"NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe (40GB and 80GB)"},
      {"Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2 (16GB and 32GB)"},
      {"Tesla V100-PCIE-32GB", "NVIDIA V100 PCIe (16GB and 32GB)"},
      {"Tesla T4", "NVIDIA T4 16GB"},
      {"NVIDIA L4", "NVIDIA L4 24GB"},
      {"  nvidia h200 ", "NVIDIA H200 SXM 141GB"},  // case and surrounding blanks do not matter
  };
  for (const auto& [cuda, model] : names) {
    const DevicePeaks* d = t.find(cuda);
    ASSERT_NE(d, nullptr) << cuda;
    EXPECT_EQ(d->model, model) << cuda;
  }
  // The datasheet figures, dense: Hopper's printed with-sparsity figures halved.
  EXPECT_DOUBLE_EQ(t.find("NVIDIA H200")->peak("fp32"), 67e12);
  EXPECT_DOUBLE_EQ(t.find("NVIDIA H200")->peak("tf32"), 494.5e12);
  EXPECT_DOUBLE_EQ(t.find("NVIDIA H200")->peak("bf16"), 989.5e12);
  EXPECT_DOUBLE_EQ(t.find("NVIDIA H200")->peak("int8"), 1979e12);
  EXPECT_DOUBLE_EQ(t.find("NVIDIA A100-SXM4-40GB")->peak("tf32"), 156e12);
  EXPECT_DOUBLE_EQ(t.find("Tesla T4")->peak("fp16"), 65e12);
  // PCIe and SXM boards of one chip have different peaks (H100: 51 vs 67 fp32; V100: 14 vs 15.7).
  EXPECT_DOUBLE_EQ(t.find("NVIDIA H100 PCIe")->peak("fp32"), 51e12);
  EXPECT_DOUBLE_EQ(t.find("NVIDIA H100 80GB HBM3")->peak("fp32"), 67e12);
  EXPECT_DOUBLE_EQ(t.find("Tesla V100-PCIE-16GB")->peak("fp32"), 14e12);
  EXPECT_DOUBLE_EQ(t.find("Tesla V100-SXM2-32GB")->peak("fp32"), 15.7e12);
  EXPECT_EQ(t.find("Tesla V100-SXM2-16GB")->peak("bf16"), 0.0);  // no bf16 tensor cores: absent, not invented
  // The whole name: a slower board whose name starts like a known one is not taken for it.
  EXPECT_EQ(t.find("NVIDIA H200 NVL"), nullptr);
  EXPECT_EQ(t.find("NVIDIA H100 NVL"), nullptr);
  EXPECT_EQ(t.find("NVIDIA H20"), nullptr);
  EXPECT_EQ(t.find("NVIDIA GeForce RTX 4090"), nullptr);
  EXPECT_EQ(t.find(""), nullptr);
}

TEST(ChooseGpuPeak, TheRunsComputeTypePicksThePeak) {
  const InstancePrice& local = seeded_prices().find("local");
  PeakChoice c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200", DType::bf16, false, local);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 989.5e12);
  EXPECT_EQ(c.dtype, "bf16");
  EXPECT_TRUE(contains_text(c.peak.how, "datasheet (NVIDIA H200 Tensor Core GPU datasheet")) << c.peak.how;
  EXPECT_TRUE(contains_text(c.peak.how, "NVIDIA H200 SXM 141GB: bf16 dense 989.5 TFLOP/s")) << c.peak.how;
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200", DType::f16, false, local);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 989.5e12);
  EXPECT_EQ(c.dtype, "f16");
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200", DType::f32, false, local);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 67e12);
  EXPECT_EQ(c.dtype, "f32");
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200", DType::f32, true, local);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 494.5e12);
  EXPECT_EQ(c.dtype, "tf32");
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200", DType::s8, false, local);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 1979e12);
  EXPECT_EQ(c.dtype, "s8");
  c = choose_gpu_peak(seeded_peaks(), "Tesla T4", DType::f16, false, local);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 65e12);
  EXPECT_THROW(peak_key(DType::f64, false), Error);
}

// lathe-cli cost reads the started event's peak_flops_dtype back into the table's key: every type
// the chooser records maps to the key it looked up.
TEST(ChooseGpuPeak, TheRecordedDtypeMapsBackToTheKeyItWasChosenBy) {
  const InstancePrice& local = seeded_prices().find("local");
  for (DType compute : {DType::f32, DType::bf16, DType::f16, DType::s8})
    for (bool tf32 : {false, true}) {
      if (tf32 && compute != DType::f32)
        continue;
      const PeakChoice c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200", compute, tf32, local);
      EXPECT_EQ(peak_key(c.dtype), peak_key(compute, tf32)) << c.dtype;
    }
  EXPECT_EQ(peak_key(std::string()), "fp32");  // runs recorded before the field
  EXPECT_THROW(peak_key(std::string("fp32")), Error);  // a table key is not a dtype name
  EXPECT_THROW(peak_key(std::string("f64")), Error);
}

TEST(ChooseGpuPeak, TheDevicesDatasheetWinsOverThePricedInstance) {
  // An A100 PCIe run priced as a p5.48xlarge (8x H100): MFU against the A100, not the H100.
  const PeakChoice c =
      choose_gpu_peak(seeded_peaks(), "NVIDIA A100-PCIE-40GB", DType::bf16, false, seeded_prices().find("p5.48xlarge"));
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 312e12);
  EXPECT_FALSE(contains_text(c.peak.how, "p5.48xlarge")) << c.peak.how;
}

TEST(ChooseGpuPeak, AnUnknownDeviceFallsBackToTheInstanceAndSaysSo) {
  PeakChoice c =
      choose_gpu_peak(seeded_peaks(), "NVIDIA H200 NVL", DType::bf16, false, seeded_prices().find("p5.48xlarge"));
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, seeded_prices().find("p5.48xlarge").peak_flops("bf16"));
  EXPECT_GT(c.peak.flops_per_s, 0);
  EXPECT_EQ(c.dtype, "bf16");
  EXPECT_TRUE(contains_text(c.peak.how, "cost.instance p5.48xlarge")) << c.peak.how;
  EXPECT_TRUE(contains_text(c.peak.how, "\"NVIDIA H200 NVL\" is not in")) << c.peak.how;
  // Unknown device, unpriced instance: no peak, and no MFU rather than a made-up one.
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200 NVL", DType::f32, false, seeded_prices().find("local"));
  EXPECT_EQ(c.peak.flops_per_s, 0.0);
  EXPECT_EQ(c.peak.how.rfind("unknown:", 0), 0u) << c.peak.how;
  EXPECT_TRUE(contains_text(c.peak.how, "device/mfu not reported")) << c.peak.how;
  // A known device whose datasheet has no figure for the type: unknown too, naming the type.
  c = choose_gpu_peak(seeded_peaks(), "Tesla V100-SXM2-16GB", DType::bf16, false, seeded_prices().find("p3.2xlarge"));
  EXPECT_EQ(c.peak.flops_per_s, 0.0);
  EXPECT_TRUE(contains_text(c.peak.how, "gives no bf16 peak")) << c.peak.how;
}

TEST(MigName, SplitsTheBoardFromTheSlicesProfile) {
  std::optional<MigName> m = parse_mig_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->board, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(m->profile, "1g.5gb");
  m = parse_mig_name("  NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb ");  // a compute instance of a 3g slice
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->board, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(m->profile, "1c.3g.40gb");
  for (const char* whole : {"NVIDIA H200", "NVIDIA H100 80GB HBM3", "MIG 1g.5gb", "NVIDIA A100 MIG", "NVIDIA A100 MIG x"})
    EXPECT_FALSE(parse_mig_name(whole).has_value()) << whole;
}

TEST(ChooseGpuPeak, AMigSliceGetsItsShareOfTheBoardsPeakBySMs) {
  const InstancePrice& p5 = seeded_prices().find("p5.48xlarge");
  // H100 SXM5 1g.10gb: 16 of the board's 132 SMs; A100 7g.40gb: 98 of 108 (not the whole board).
  PeakChoice c = choose_gpu_peak(seeded_peaks(), "NVIDIA H100 80GB HBM3 MIG 1g.10gb", DType::bf16, false, p5, 16);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 989.5e12 * 16 / 132);
  EXPECT_EQ(c.dtype, "bf16");
  EXPECT_TRUE(contains_text(c.peak.how, "MIG 1g.10gb slice (16 of 132 SMs)")) << c.peak.how;
  EXPECT_TRUE(contains_text(c.peak.how, "x 16 of its 132 SMs")) << c.peak.how;
  EXPECT_FALSE(contains_text(c.peak.how, "p5.48xlarge")) << c.peak.how;  // not the instance's whole GPU
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA A100-SXM4-40GB MIG 7g.40gb", DType::f32, false, p5, 98);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 19.5e12 * 98 / 108);
  // The slice's SM count unknown (or above the board's): no MFU rather than the whole board's peak.
  for (int sms : {0, 133}) {
    c = choose_gpu_peak(seeded_peaks(), "NVIDIA H200 MIG 1g.18gb", DType::bf16, false, p5, sms);
    EXPECT_EQ(c.peak.flops_per_s, 0.0) << sms;
    EXPECT_TRUE(contains_text(c.peak.how, "device/mfu not reported")) << c.peak.how;
  }
  // A slice of a board the table does not list: no peak either (the instance's is a whole GPU's).
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H100 NVL MIG 1g.12gb", DType::bf16, false, p5, 16);
  EXPECT_EQ(c.peak.flops_per_s, 0.0);
  EXPECT_TRUE(contains_text(c.peak.how, "is a MIG slice of \"NVIDIA H100 NVL\"")) << c.peak.how;
  // The whole board by its own name keeps its full peak, whatever SM count is passed.
  c = choose_gpu_peak(seeded_peaks(), "NVIDIA H100 80GB HBM3", DType::bf16, false, p5, 132);
  EXPECT_DOUBLE_EQ(c.peak.flops_per_s, 989.5e12);
}

TEST(DevicePeaks, AMigSliceIsItsBoardsEntryScaledBySMs) {
  const DevicePeakTable& table = seeded_peaks();
  // The whole board by its own name: its entry as it is.
  std::optional<DevicePeaks> d = device_peaks(table, "NVIDIA H100 80GB HBM3", 132);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->model, table.find("NVIDIA H100 80GB HBM3")->model);
  EXPECT_DOUBLE_EQ(d->peak("bf16"), 989.5e12);
  // A 3g.40gb slice with 60 of the 132 SMs: every type's peak x 60/132, the slice named.
  d = device_peaks(table, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60);
  ASSERT_TRUE(d.has_value());
  const DevicePeaks& board = *table.find("NVIDIA H100 80GB HBM3");
  ASSERT_EQ(d->peak_per_s.size(), board.peak_per_s.size());
  for (const auto& [key, per_s] : board.peak_per_s)
    EXPECT_DOUBLE_EQ(d->peak(key), per_s * 60 / 132) << key;
  EXPECT_EQ(d->model, board.model + ", MIG 3g.40gb slice (60 of 132 SMs)");
  EXPECT_EQ(d->sms, 60);
  // Nothing where the share is not known, and the reason.
  std::string why;
  EXPECT_FALSE(device_peaks(table, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 0, &why).has_value());
  EXPECT_TRUE(contains_text(why, "an unknown number of SMs")) << why;
  EXPECT_FALSE(device_peaks(table, "NVIDIA H100 NVL MIG 1g.12gb", 16, &why).has_value());
  EXPECT_TRUE(contains_text(why, "is a MIG slice of \"NVIDIA H100 NVL\"")) << why;
  EXPECT_FALSE(device_peaks(table, "NVIDIA H200 NVL", 132, &why).has_value());
  EXPECT_TRUE(contains_text(why, "no entry for \"NVIDIA H200 NVL\"")) << why;
}

TEST(DevicePeakTable, DefaultPathHonoursLatheDevicePeaks) {
  const char* was = std::getenv("LATHE_DEVICE_PEAKS");
  const std::string saved = was ? was : "";
  ::unsetenv("LATHE_DEVICE_PEAKS");
  EXPECT_EQ(DevicePeakTable::default_path(), LATHE_SOURCE_DIR "/resources/device_peaks.json");
  ::setenv("LATHE_DEVICE_PEAKS", "/somewhere/else.json", 1);
  EXPECT_EQ(DevicePeakTable::default_path(), "/somewhere/else.json");
  if (was)
    ::setenv("LATHE_DEVICE_PEAKS", saved.c_str(), 1);
  else
    ::unsetenv("LATHE_DEVICE_PEAKS");
}

TEST(DevicePeakTable, MalformedTablesAreRejected) {
  const std::string ok = R"({"model":"m","cuda_names":["Card A"],"peak_tflops":{"fp32":1},"source":"s datasheet"})";
  const std::string good = write_peaks_temp("good.json", R"({"version":1,"devices":[)" + ok + "]}");
  EXPECT_NO_THROW(DevicePeakTable::load(good));
  EXPECT_NE(DevicePeakTable::load(good).find("card a"), nullptr);
  fs::remove(good);

  auto expect_bad = [](const std::string& name, const std::string& text, const std::string& needle) {
    const std::string path = write_peaks_temp(name, text);
    try {
      DevicePeakTable::load(path);
      ADD_FAILURE() << "accepted " << text;
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    fs::remove(path);
  };
  auto table = [](const std::string& entry) { return R"({"version":1,"devices":[)" + entry + "]}"; };
  expect_bad("syntax.json", "{\"devices\": [", "not valid JSON");
  expect_bad("version.json", R"({"version":2,"devices":[]})", "\"version\" must be 1");
  expect_bad("nolist.json", R"({"version":1,"devices":3})", "\"devices\" must be a list");
  expect_bad("nosource.json", table(R"({"model":"m","cuda_names":["A"],"peak_tflops":{"fp32":1}})"),
             "missing \"source\"");
  expect_bad("nonames.json", table(R"({"model":"m","cuda_names":[],"peak_tflops":{"fp32":1},"source":"s"})"),
             "\"cuda_names\" must be a non-empty list");
  expect_bad("fp8.json", table(R"({"model":"m","cuda_names":["A"],"peak_tflops":{"fp8":1},"source":"s"})"),
             "peak_tflops.fp8: unknown data type (allowed: fp32, tf32, bf16, fp16, int8)");
  expect_bad("zero.json", table(R"({"model":"m","cuda_names":["A"],"peak_tflops":{"bf16":0},"source":"s"})"),
             "peak_tflops.bf16 must be a number > 0");
  expect_bad("text.json", table(R"({"model":"m","cuda_names":["A"],"peak_tflops":{"fp32":"67"},"source":"s"})"),
             "peak_tflops.fp32 must be a number > 0");
  expect_bad("twice.json",
             table(ok + "," + R"({"model":"n","cuda_names":["card A"],"peak_tflops":{"fp32":2},"source":"s"})"),
             "\"card A\" is listed twice");
  expect_bad("sms.json", table(R"({"model":"m","cuda_names":["A"],"peak_tflops":{"fp32":1},"source":"s","sms":0})"),
             "\"sms\" (the board's streaming multiprocessors) must be an integer > 0");
  expect_bad("missing.json", "", "not valid JSON");
  try {
    DevicePeakTable::load("/nonexistent/device_peaks.json");
    ADD_FAILURE() << "loaded a file that is not there";
  } catch (const DataError& e) {
    EXPECT_TRUE(contains_text(e.what(), "LATHE_DEVICE_PEAKS")) << e.what();
  }
}

}  // namespace
}  // namespace lathe
