// MFU against the best peak recorded for this CPU and thread count: an earlier run in the store
// that measured a higher peak (or achieved a higher rate) on the same CPU model with the same
// thread count is the floor of a new run's peak; runs on another CPU or thread count are not.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/data/dataset.h"
#include "engine/store/run_writer.h"
#include "engine/store/store.h"

using namespace lathe::test;

namespace {

/// An earlier finished run whose started event says it measured `peak` on (cpu, threads).
/// `dtype`: the peak's data type ("" = no field, as before bf16 peaks); `devices`: its
/// compute.devices; `note_world`: the note's world_size field (0 = none, as before it existed).
void seed_run(const std::string& db, const std::string& cpu, int threads, double peak, double achieved = 0,
              const std::string& dtype = "", int devices = 1, int note_world = 0) {
  lathe::RunWriter w(db);
  lathe::RunInfo info;
  info.name = "earlier";
  info.backend = "cpu";
  info.config = {{"compute", {{"devices", devices}}}};
  w.begin_run(info);
  nlohmann::json started = {{"device", cpu},
                            {"threads", threads},
                            {"peak_flops_per_s", peak},
                            {"peak_flops_how", "measured: oneDNN SGEMM 2048^3 " + (dtype.empty() ? "f32" : dtype)}};
  if (!dtype.empty())
    started["peak_flops_dtype"] = dtype;
  w.event("started", started);
  if (achieved > 0) {
    nlohmann::json note = {{"kind", "mfu_peak_raised"}, {"peak_flops_per_s", peak}, {"achieved_flops_per_s", achieved}};
    if (note_world > 0)
      note["world_size"] = note_world;
    w.event("note", note);
  }
  w.finish(lathe::RunStatus::finished);
}

}  // namespace

TEST_F(Cli, MfuPeakIsAtLeastTheBestRecordedForThisCpuAndThreadCount) {
  if (!std::filesystem::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cpu = lathe::cpu_model_name();
  seed_run(db(), cpu, 1, 4e14, 5e14);         // this machine, 1 thread: a note raised it to 5e14
  seed_run(db(), cpu, 2, 9e15);               // another thread count: not this run's floor
  seed_run(db(), "Some Other CPU", 1, 8e15);  // another CPU: neither
  const std::string cfg = write("tiny.json", R"({"name": "floored", "model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 256, "test_subset": 100}})");
  const CmdResult r = run_shell("OMP_NUM_THREADS=1 XDG_CACHE_HOME=" + (m_dir / "cache").string() + " " + cli_binary() +
                                " run " + cfg + " " + out_dir());
  ASSERT_EQ(r.code, 0) << r.out;

  lathe::Store store = lathe::Store::open(db(), lathe::Store::read_only_options());
  const std::string id = store.resolve_run("floored");
  double peak = 0;
  std::string how;
  for (const lathe::EventRecord& e : store.events(id))
    if (e.kind == "started") {
      peak = e.fields["peak_flops_per_s"].get<double>();
      how = e.fields["peak_flops_how"].get<std::string>();
    }
  EXPECT_DOUBLE_EQ(peak, 5e14);
  EXPECT_NE(how.find("best recorded in the run store"), std::string::npos) << how;
  // Every MFU sample is computed against it (a student model on one thread is far below 5e14 FLOP/s).
  const auto mfu = store.series(id, "device/mfu");
  ASSERT_FALSE(mfu.empty());
  for (const lathe::Point& p : mfu) {
    EXPECT_GT(p.value, 0);
    EXPECT_LT(p.value, 1e-2);
  }
}

// A bf16 run's peak (its bf16 matmul rate) is no floor for an f32 run's, and an old note of a
// 2-rank run (its rate was both ranks' together) is none either; a note that says its world size
// holds one rank's rate, which is.
TEST_F(Cli, MfuPeakFloorLeavesOutBf16PeaksAndOldNotesOfSeveralRanks) {
  if (!std::filesystem::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  // Runs a tiny one-thread student in the test's store; the peak its started event records.
  const auto floored_peak = [&](const std::string& name) {
    const std::string cfg = write(name + ".json", R"({"name": ")" + name + R"(", "model": {"zoo": "student"},
        "train": {"epochs": 1}, "data": {"train_subset": 256, "test_subset": 100}})");
    const CmdResult r = run_shell("OMP_NUM_THREADS=1 XDG_CACHE_HOME=" + (m_dir / "cache").string() + " " +
                                  cli_binary() + " run " + cfg + " " + out_dir());
    EXPECT_EQ(r.code, 0) << r.out;
    lathe::Store store = lathe::Store::open(db(), lathe::Store::read_only_options());
    for (const lathe::EventRecord& e : store.events(store.resolve_run(name)))
      if (e.kind == "started")
        return e.fields["peak_flops_per_s"].get<double>();
    return 0.0;
  };
  const std::string cpu = lathe::cpu_model_name();
  seed_run(db(), cpu, 1, 4e14);                  // the f32 floor
  seed_run(db(), cpu, 1, 9e15, 0, "bf16");       // a bf16 peak: not an f32 floor
  seed_run(db(), cpu, 1, 4e14, 8e15, "f32", 2);  // 2 ranks, old note: both ranks' rate
  EXPECT_DOUBLE_EQ(floored_peak("f32-after-bf16"), 4e14);
  seed_run(db(), cpu, 1, 4e14, 6e14, "f32", 2, 2);  // 2 ranks, new note: one rank's rate
  EXPECT_DOUBLE_EQ(floored_peak("after-new-note"), 6e14);
}
