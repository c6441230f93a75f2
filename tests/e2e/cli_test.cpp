// lathe-cli as a user runs it: exit code 2 with a clear message for a bad config or a bad dataset
// file, nothing written in either case (no run folder, no store row); --json ends with the finished
// event; the history commands (list, show, compare, export, delete) read back what runs recorded.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "engine/data/dataset.h"

namespace {

using lathe::test::Cli;
using lathe::test::CmdResult;
using lathe::test::run_cmd;
namespace fs = std::filesystem;

/// `lathe-cli validate CONFIG` accepts it (exit 0) and prints each of `warnings`; with `fixes` (the
/// --set options that make every knob count) it accepts it and warns about nothing.
void expect_warnings_until_fixed(const std::string& cfg, const std::vector<std::string>& warnings,
                                 const std::string& fixes) {
  const CmdResult r = run_cmd("validate " + cfg);
  EXPECT_EQ(r.code, 0) << r.out;
  for (const std::string& warning : warnings)
    EXPECT_NE(r.out.find(warning), std::string::npos) << warning << "\n" << r.out;
  const CmdResult clean = run_cmd("validate " + cfg + " " + fixes);
  EXPECT_EQ(clean.code, 0) << clean.out;
  EXPECT_EQ(clean.out.find("warning:"), std::string::npos) << clean.out;
}

TEST_F(Cli, UnknownKeyIsRejectedWithItsPathAndExitCode2) {
  const std::string cfg = write("bad.json", R"({"train": {"epochs": 1, "learning_rate": 0.1}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.learning_rate"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
  EXPECT_FALSE(store_written());
}

TEST_F(Cli, ValidateWarnsAboutAKnobThatDoesNothingForThisConfig) {
  const std::string cfg = write("unused.json", R"({"data": {"dataset": "fashion-mnist", "image_size": 64}})");
  expect_warnings_until_fixed(cfg, {"warning: data.image_size is set but only used when data.dataset is \"folder\""},
                              "--set data.dataset=folder --set data.path=/nowhere");
}

// The other condition kinds reach the same warning: a number above a bound, a non-empty string,
// either of two switches; set so that they apply, nothing is said.
TEST_F(Cli, ValidateWarnsAboutKnobsBehindANumberATeacherOrEitherOfTwoSwitches) {
  const std::string cfg = write("unused2.json", R"({"cost": {"notice_s": 30}, "distill": {"alpha": 0.5},
                                                    "quant": {"mode": "ptq-static", "percentile": 99.9}})");
  expect_warnings_until_fixed(
      cfg,
      {"warning: cost.notice_s is set but only used when cost.interruptions_per_hour > 0 "
       "(cost.interruptions_per_hour is 0, the default): it has no effect",
       "warning: distill.alpha is set but only used when distill.teacher is not empty (distill.teacher is \"\", the "
       "default): it has no effect",
       "warning: quant.percentile is set but only used when quant.mode is \"ptq-static\" or \"qat\", and "
       "(quant.calibration is \"percentile\" or quant.compare_calibrators is true) (quant.calibration is "
       "\"minmax\", the default; quant.compare_calibrators is false, the default): it has no effect"},
      "--set cost.interruptions_per_hour=1.5 --set distill.teacher=zoo:teacher --set quant.compare_calibrators=true");
}

// The stage sections: prune.* without a prune.method, a low-rank knob the chosen rank overrides, a
// zoo teacher's epochs under a saved teacher (a "starts with" condition). Each is named with what
// would make it count; switched on, nothing is said.
TEST_F(Cli, ValidateWarnsAboutStageKnobsTheirMethodOrTeacherDoesNotRead) {
  const std::string cfg = write("unused3.json", R"({"prune": {"ratio": 0.7},
                                                    "lowrank": {"method": "svd", "rank": 4, "scope": "global"},
                                                    "distill": {"teacher": "run:baseline", "teacher_epochs": 3}})");
  expect_warnings_until_fixed(
      cfg,
      {"warning: prune.ratio is set but only used when prune.method is \"l1-unstructured\", \"l1-structured\", "
       "\"l2-structured\" or \"nm\", and (prune.method is \"l1-unstructured\", \"l1-structured\" or "
       "\"l2-structured\" or prune.sensitivity_pick is true) (prune.method is \"none\", the default; "
       "prune.sensitivity_pick is false, the default): it has no effect",
       "warning: lowrank.scope is set but only used when lowrank.method is \"svd\", and lowrank.rank is 0 "
       "(lowrank.rank is 4): it has no effect",
       "warning: distill.teacher_epochs is set but only used when distill.teacher starts with \"zoo:\" "
       "(distill.teacher is \"run:baseline\"): it has no effect"},
      "--set prune.method=l1-structured --set lowrank.rank=0 --set distill.teacher=zoo:teacher");
}

TEST_F(Cli, OutOfRangeValueNamesTheAllowedRange) {
  const std::string cfg = write("bad.json", R"({"train": {"batch_size": 0}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.batch_size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
  EXPECT_FALSE(store_written());
}

TEST_F(Cli, BadOverrideTypeIsRejected) {
  const std::string cfg = write("ok.json", R"({"model": {"zoo": "mlp"}})");
  const CmdResult r = run_cmd("run " + cfg + " --set train.epochs=lots " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("train.epochs"), std::string::npos) << r.out;
}

TEST_F(Cli, MissingConfigFileIsExitCode2) {
  const CmdResult r = run_cmd("run " + (m_dir / "nope.json").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("nope.json"), std::string::npos) << r.out;
}

TEST_F(Cli, TruncatedDatasetFileIsRejectedAndNothingIsWritten) {
  // An IDX image file whose header promises more bytes than it holds.
  std::ofstream img(m_dir / "imgs.idx", std::ios::binary);
  const unsigned char header[] = {0, 0, 8, 3, 0, 0, 0, 100, 0, 0, 0, 28, 0, 0, 0, 28};
  img.write(reinterpret_cast<const char*>(header), sizeof(header));
  img.write("\0\0\0\0", 4);
  img.close();
  std::ofstream lab(m_dir / "labels.idx", std::ios::binary);
  const unsigned char lheader[] = {0, 0, 8, 1, 0, 0, 0, 100};
  lab.write(reinterpret_cast<const char*>(lheader), sizeof(lheader));
  for (int i = 0; i < 100; ++i)
    lab.put(static_cast<char>(i % 10));
  lab.close();
  const std::string img_path = (m_dir / "imgs.idx").string(), lab_path = (m_dir / "labels.idx").string();
  const std::string cfg = write("idx.json", R"({"data": {"dataset": "idx", "train_images": ")" + img_path +
                                                R"(", "train_labels": ")" + lab_path + R"(", "test_images": ")" +
                                                img_path + R"(", "test_labels": ")" + lab_path + R"("}})");
  const CmdResult r = run_cmd("run " + cfg + " " + out_dir());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("imgs.idx"), std::string::npos) << r.out;
  EXPECT_FALSE(runs_written());
  EXPECT_FALSE(store_written());
}

TEST_F(Cli, JsonModePrintsOneObjectPerLineEndingWithFinished) {
  if (!fs::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 512, "test_subset": 500}})");
  const std::string cmd = std::string(LATHE_TEST_BINARY_DIR) + "/app/lathe-cli run " + cfg + " --json " + out_dir();
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  ASSERT_EQ(WEXITSTATUS(pclose(p)), 0) << out;
  std::istringstream lines(out);
  std::string line, last;
  double peak = 0, flops_per_sample = 0;  // the peak the run ended with (raised by notes, if any)
  while (std::getline(lines, line)) {
    ASSERT_TRUE(nlohmann::json::accept(line)) << line;
    last = line;
    const auto j = nlohmann::json::parse(line);
    if (j.value("event", "") == "started")
      peak = j.value("peak_flops_per_s", 0.0);
    if (j.value("event", "") == "note" && j.value("kind", "") == "mfu_peak_raised")
      peak = j.value("achieved_flops_per_s", peak);
    if (j.value("metric", "") == "model/flops_per_sample")
      flops_per_sample = j.value("value", 0.0);
  }
  const auto fin = nlohmann::json::parse(last);
  EXPECT_EQ(fin["event"], "finished");
  EXPECT_GT(fin["metrics"]["test/accuracy"].get<double>(), 0.5);
  EXPECT_TRUE(runs_written());
  // The training phase as a whole: its 512 samples over its training seconds, and the MFU of that
  // rate (3 x forward FLOPs per sample against the run's final peak), beside the last window's.
  const auto& m = fin["metrics"];
  ASSERT_TRUE(m.contains("train/samples_per_s_mean") && m.contains("train/seconds")) << m.dump();
  const double mean = m["train/samples_per_s_mean"].get<double>();
  EXPECT_NEAR(mean, 512.0 / m["train/seconds"].get<double>(), 1e-9 * mean);
  ASSERT_GT(peak, 0);
  ASSERT_GT(flops_per_sample, 0);
  ASSERT_TRUE(m.contains("device/mfu_mean")) << m.dump();
  EXPECT_NEAR(m["device/mfu_mean"].get<double>(), mean * 3 * flops_per_sample / peak, 1e-9);
}

TEST_F(Cli, HistoryCommandsReadBackRecordedRuns) {
  if (!fs::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"name": "tiny", "model": {"zoo": "student"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 512, "test_subset": 500}})");
  ASSERT_EQ(run_cmd("run " + cfg + " " + out_dir() + " --set seed=1").code, 0);
  ASSERT_EQ(run_cmd("run " + cfg + " " + out_dir() + " --set seed=2 --set name=tiny2").code, 0);

  const CmdResult list = run_cmd("--db " + db() + " list --json");
  ASSERT_EQ(list.code, 0) << list.out;
  const auto runs = nlohmann::json::parse(list.out);
  ASSERT_EQ(runs["total"], 2);
  const std::string newest = runs["runs"][0]["id"], oldest = runs["runs"][1]["id"];
  EXPECT_EQ(runs["runs"][0]["name"], "tiny2");
  EXPECT_EQ(runs["runs"][0]["status"], "finished");
  EXPECT_TRUE(runs["runs"][0]["metrics"].contains("test/accuracy"));

  const CmdResult filtered = run_cmd("--db " + db() + " list --json --param seed=1");
  EXPECT_EQ(nlohmann::json::parse(filtered.out)["total"], 1) << filtered.out;
  EXPECT_EQ(nlohmann::json::parse(run_cmd("--db " + db() + " list --json --name 'tiny?'").out)["total"], 1);

  // show by name; the summary's last value is the metric's final value in metrics.jsonl.
  const CmdResult show = run_cmd("--db " + db() + " show tiny2 --json");
  ASSERT_EQ(show.code, 0) << show.out;
  const auto shown = nlohmann::json::parse(show.out);
  EXPECT_EQ(shown["id"], newest);
  EXPECT_EQ(shown["config"]["seed"], 2);
  const auto acc = shown["metrics"]["test/accuracy"];
  EXPECT_EQ(acc["count"], 1);
  EXPECT_EQ(acc["last"], acc["best"]);
  bool has_model = false;
  for (const auto& a : shown["artifacts"])
    has_model |= a["kind"] == "model" && a["bytes"].get<int64_t>() > 0;
  EXPECT_TRUE(has_model) << show.out;
  std::ifstream metrics(m_dir / "runs" / newest / "metrics.jsonl");
  std::string line;
  double jsonl_acc = -1;
  while (std::getline(metrics, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("metric", "") == "test/accuracy")
      jsonl_acc = j["value"];
  }
  EXPECT_DOUBLE_EQ(acc["last"].get<double>(), jsonl_acc);

  // compare --diff-only shows the keys that differ (name, seed) and hides the rest.
  const CmdResult cmp =
      run_cmd("--db " + db() + " compare " + oldest + " " + newest.substr(0, 22) + " --diff-only --json");
  ASSERT_EQ(cmp.code, 0) << cmp.out;
  const auto diff = nlohmann::json::parse(cmp.out);
  EXPECT_TRUE(diff["config"].contains("seed"));
  EXPECT_TRUE(diff["config"].contains("name"));
  EXPECT_FALSE(diff["config"].contains("train.epochs"));
  const CmdResult cmp_text = run_cmd("--db " + db() + " compare " + oldest + " " + newest);
  EXPECT_NE(cmp_text.out.find("test/accuracy"), std::string::npos) << cmp_text.out;

  // export: every sample, as many rows as the summaries count.
  const std::string csv = (m_dir / "all.csv").string();
  ASSERT_EQ(run_cmd("--db " + db() + " export " + newest + " --format csv -o " + csv).code, 0);
  std::ifstream in(csv);
  int rows = 0;
  while (std::getline(in, line))
    ++rows;
  int64_t expected = 0;
  for (const auto& [k, m] : shown["metrics"].items())
    expected += m["count"].get<int64_t>();
  EXPECT_EQ(rows - 1, expected);

  // an ambiguous prefix is refused with the candidates; delete needs --yes without a terminal.
  const CmdResult ambiguous = run_cmd("--db " + db() + " show " + newest.substr(0, 2));
  EXPECT_EQ(ambiguous.code, 2) << ambiguous.out;
  EXPECT_EQ(run_cmd("--db " + db() + " delete " + oldest + " < /dev/null").code, 2);
  const CmdResult del = run_cmd("--db " + db() + " delete " + oldest + " --yes");
  ASSERT_EQ(del.code, 0) << del.out;
  EXPECT_EQ(nlohmann::json::parse(run_cmd("--db " + db() + " list --json").out)["total"], 1);
  EXPECT_FALSE(fs::exists(m_dir / "runs" / oldest / "model.safetensors"));
}

}  // namespace

TEST_F(Cli, RunTeacherReferencesAreResolvedThroughTheStoreByTheCli) {
  if (!fs::exists(lathe::default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string cfg = write("tiny.json", R"({"name": "teach", "model": {"zoo": "mlp"}, "train": {"epochs": 1},
                                                 "data": {"train_subset": 256, "test_subset": 200}})");
  ASSERT_EQ(run_cmd("run " + cfg + " " + out_dir()).code, 0);
  // The student's runs go to another folder: only the store knows where the teacher's file is.
  const std::string other = (m_dir / "other").string();
  const CmdResult r = run_cmd("run " + cfg + " --json --db " + db() + " --set output.dir=" + other +
                              " --set name=student --set model.zoo=student --set distill.teacher=run:teach");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("store artifact of run"), std::string::npos) << r.out;
  // Without a store the engine looks only in the run folders of output.dir: not there.
  const CmdResult none = run_cmd("run " + cfg + " --db " + (m_dir / "no-store.db").string() +
                                 " --set output.dir=" + other + " --set distill.teacher=run:teach");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("distill.teacher: run 'teach' not found"), std::string::npos) << none.out;
}
