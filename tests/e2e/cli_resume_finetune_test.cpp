// Checkpoints inside the prune stage's AGP fine-tuning (issue 14): a prune-agp80-like run killed
// with SIGKILL mid-AGP and resumed with `lathe-cli resume` continues the fine-tuning from its
// checkpoint (skipping the training and the measurements before the fine-tuning, already in the
// store) and ends with the uninterrupted run's pruned weights and metric series, each step once.
// The same for a run killed inside QAT's fake-quantized fine-tuning: the resume skips the
// calibration (the ranges come from the checkpoint) and ends with the same INT8 model.
// The boundary between training and stages: the finished main training is checkpointed before the
// stages that follow it, so a run killed (kill -9) or stopped (SIGTERM) in stage work that has no
// checkpoint of its own (pruning, PTQ calibration, latencies) resumes with the stages, no training
// step again, and ends with the uninterrupted run's models and series (on 1 and 2 ranks).
// The model-replacing stages' fine-tunings (structured pruning, low-rank) resume mid-way: the
// resume rebuilds the smaller model from the dense weights in the checkpoint, also for a later
// stage's checkpoint (QAT after structured pruning).
// Distillation with a zoo teacher trained first: a run killed (or stopped) in the student's training
// resumes with the trained teacher's weights from the checkpoint, not training the teacher again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/data/dataset.h"
#include "engine/nn/safetensors.h"
#include "engine/run/checkpoint.h"
#include "engine/store/store.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/fashion_mnist.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::cli_binary;
using test::CmdResult;

using test::have_fashion_mnist;

using test::only_subfolder;

class CliResumeFinetune : public test::Cli {
 protected:
  void SetUp() override {
    test::Cli::SetUp();
    m_dir /= ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(m_dir);
  }
};

/// Runs `cli_args` (a `run ... --json`) under `exec`, follows its JSON lines, and SIGKILLs it once
/// it has logged a train/* sample `steps_in` steps into phase `phase`.
struct KilledRun {
  std::string run_id;
  int64_t phase_first = -1;  ///< the phase's first_step, -1 when it never started
  int64_t killed_at = -1;    ///< the step of the sample that triggered the kill, -1 when none
};

KilledRun kill_inside_phase(const std::string& cli_args, const std::string& phase, int64_t steps_in) {
  KilledRun k;
  const std::string cmd = "echo $$; exec " + cli_binary() + " " + cli_args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return k;
  char line[1 << 16];
  if (!fgets(line, sizeof line, p)) {
    pclose(p);
    return k;
  }
  const pid_t pid = static_cast<pid_t>(std::stol(line));
  while (fgets(line, sizeof line, p)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      continue;
    if (j.value("event", "") == "started")
      k.run_id = j["run_id"];
    if (j.value("event", "") == "phase" && j.value("phase", "") == phase)
      k.phase_first = j["first_step"];
    if (k.killed_at < 0 && k.phase_first >= 0 && j.contains("metric") &&
        j["metric"].get<std::string>().rfind("train/", 0) == 0 &&
        j["step"].get<int64_t>() >= k.phase_first + steps_in) {
      k.killed_at = j["step"];
      kill(pid, SIGKILL);
    }
  }
  pclose(p);
  return k;
}

/// Runs `cli_args` (a `run ... --json`) and sends it `sig` at the first JSON line `when` accepts.
/// Returns the run id, whether it was signalled, and how it ended.
struct SignalledRun {
  std::string run_id;
  bool signalled = false;
  int exit_code = -1;  ///< when it exited
  int killed_by = 0;   ///< the signal that ended it, 0 when it exited
};

SignalledRun signal_when(const std::string& cli_args, int sig, const std::function<bool(const nlohmann::json&)>& when) {
  SignalledRun r;
  const std::string cmd = "echo $$; exec " + cli_binary() + " " + cli_args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return r;
  char line[1 << 16];
  if (!fgets(line, sizeof line, p)) {
    pclose(p);
    return r;
  }
  const pid_t pid = static_cast<pid_t>(std::stol(line));
  while (fgets(line, sizeof line, p)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      continue;
    if (j.value("event", "") == "started")
      r.run_id = j["run_id"];
    if (!r.signalled && when(j)) {
      kill(pid, sig);
      r.signalled = true;
    }
  }
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return r;
}

/// The trained model's artifact: the main training's last step, final evaluation and model file
/// are done; the stages have not started, or have only just.
bool trained_model_saved(const nlohmann::json& j) {
  return j.value("event", "") == "artifact" && j.value("kind", "") == "model";
}

void expect_same_tensors(const std::string& got_path, const std::string& want_path) {
  const SafetensorsFile got = load_safetensors(got_path);
  const SafetensorsFile want = load_safetensors(want_path);
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << got_path;
  for (size_t i = 0; i < got.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].first, want.tensors[i].first);
    ASSERT_EQ(got.tensors[i].second.nbytes(), want.tensors[i].second.nbytes());
    EXPECT_EQ(std::memcmp(got.tensors[i].second.raw(), want.tensors[i].second.raw(), got.tensors[i].second.nbytes()), 0)
        << got_path << ": " << got.tensors[i].first;
  }
}

/// Each metric's series in the resumed run equals the uninterrupted run's, step for step: no
/// sample lost, none twice, the same values.
void expect_same_series(const Store& store, const std::string& run_id, const Store& ref_store,
                        const std::string& ref_id, const std::vector<std::string>& metrics) {
  for (const std::string& m : metrics) {
    const std::vector<Point> a = store.series(run_id, m), b = ref_store.series(ref_id, m);
    ASSERT_EQ(a.size(), b.size()) << m;
    ASSERT_FALSE(a.empty()) << m;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].step, b[i].step) << m;
      EXPECT_EQ(a[i].value, b[i].value) << m << " at step " << a[i].step;
    }
  }
}

/// The JSON lines of `out` (a `--json` run's stdout) that are `kind` events with this phase.
int count_lines(const std::string& out, const std::string& kind, const std::string& phase) {
  int n = 0;
  size_t at = 0;
  while (at < out.size()) {
    const size_t end = std::min(out.find('\n', at), out.size());
    const auto j = nlohmann::json::parse(out.substr(at, end - at), nullptr, false);
    n += j.is_object() && j.value("event", "") == kind && j.value("phase", "") == phase;
    at = end + 1;
  }
  return n;
}

/// How many `kind` events (of phase `phase`, when given) the run has in the store.
int count_events(const Store& store, const std::string& run_id, const std::string& kind,
                 const std::string& phase = "") {
  int n = 0;
  for (const EventRecord& e : store.events(run_id))
    n += e.kind == kind && (phase.empty() || e.fields.value("phase", "") == phase);
  return n;
}

TEST_F(CliResumeFinetune, KillNineMidAgpThenResumeEndsBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  // 64 steps an epoch: 1 training epoch, then 2 fine-tuning epochs with AGP 0 -> 80% over the
  // first 64 fine-tuning steps (masks every 10), a checkpoint every 20 global steps.
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=1 --set train.batch_size=16 --set train.threads=1 --set seed=4"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=20"
      " --set prune.method=l1-unstructured --set prune.ratio=0.8 --set prune.schedule=agp"
      " --set prune.finetune_epochs=2 --set prune.agp.frequency=10";
  const std::string cfg = write("c.json", "{}");
  const std::string ref_db = (m_dir / "ref.db").string();
  const CmdResult ref =
      test::run_cmd("--db " + ref_db + " run " + cfg + " --set output.dir=" + (m_dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;

  // The run under test, killed once it has logged 45 fine-tuning steps (past the checkpoint of
  // global step 100, the fine-tuning starting at 64; AGP grows the masks until step 128).
  const KilledRun k = kill_inside_phase(
      "--db " + db() + " run " + cfg + " --json --set output.dir=" + (m_dir / "runs").string() + common, "finetune",
      45);
  const std::string& run_id = k.run_id;
  ASSERT_EQ(k.phase_first, 64);
  ASSERT_GE(k.killed_at, 109) << "the run ended before the kill";
  ASSERT_LT(k.killed_at, 128) << "killed after the AGP schedule ended";

  const CmdResult resumed = test::run_cmd("--db " + db() + " resume " + run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("\"stage\":\"prune\""), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("\"from_step\":100"), std::string::npos) << resumed.out;
  // The resumed process neither trains again nor measures the dense baseline again.
  EXPECT_EQ(resumed.out.find("\"phase\":\"train\""), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("dense/test_accuracy"), std::string::npos) << resumed.out;

  // The pruned weights are the uninterrupted run's (the file's metadata names the run, so the
  // tensors are compared).
  const std::string run_dir = only_subfolder(m_dir / "runs");
  expect_same_tensors(run_dir + "/model.pruned.safetensors",
                      only_subfolder(m_dir / "ref") + "/model.pruned.safetensors");

  Store store = Store::open(db());
  Store ref_store = Store::open(ref_db);
  EXPECT_EQ(store.run(run_id).status, RunStatus::finished);
  const std::string ref_id = fs::path(only_subfolder(m_dir / "ref")).filename().string();
  expect_same_series(
      store, run_id, ref_store, ref_id,
      {"train/loss", "train/accuracy", "train/lr", "test/accuracy", "test/loss", "prune/sparsity",
       "dense/test_accuracy", "pruned_before_finetune/test_accuracy", "pruned/test_accuracy", "prune/accuracy_drop_pt",
       "prune/flops_ratio", "model/bytes", "model/dense_bytes", "prune/bytes_ratio", "pruned/deployed_test_accuracy"});
  int resumed_events = 0;
  for (const EventRecord& e : store.events(run_id))
    resumed_events += e.kind == "resumed";
  EXPECT_EQ(resumed_events, 1);
}

TEST_F(CliResumeFinetune, KillNineMidQatThenResumeEndsWithTheSameInt8Model) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  // 64 steps an epoch: 1 training epoch, the quantize stage's step 65, then 2 QAT epochs (steps
  // 66-193), a checkpoint every 20 global steps.
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=1 --set train.batch_size=16 --set train.threads=1 --set seed=4"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=20"
      " --set quant.mode=qat --set quant.qat_epochs=2 --set quant.calib_samples=128";
  const std::string cfg = write("c.json", "{}");
  const std::string ref_db = (m_dir / "ref.db").string();
  const CmdResult ref =
      test::run_cmd("--db " + ref_db + " run " + cfg + " --set output.dir=" + (m_dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;

  const KilledRun k = kill_inside_phase(
      "--db " + db() + " run " + cfg + " --json --set output.dir=" + (m_dir / "runs").string() + common, "qat", 50);
  const std::string& run_id = k.run_id;
  ASSERT_EQ(k.phase_first, 65);
  ASSERT_GE(k.killed_at, 115) << "the run ended before the kill";
  ASSERT_LT(k.killed_at, 193) << "killed after QAT ended";

  const CmdResult resumed = test::run_cmd("--db " + db() + " resume " + run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("\"stage\":\"quant\""), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("\"phase\":\"qat\""), std::string::npos) << resumed.out;
  // No training and no calibration again: the ranges came from the checkpoint.
  EXPECT_EQ(resumed.out.find("\"phase\":\"train\""), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("quant/calib_samples"), std::string::npos) << resumed.out;
  EXPECT_EQ(resumed.out.find("quant/ptq_test_accuracy"), std::string::npos) << resumed.out;

  const std::string run_dir = only_subfolder(m_dir / "runs"), ref_dir = only_subfolder(m_dir / "ref");
  expect_same_tensors(run_dir + "/model_int8.safetensors", ref_dir + "/model_int8.safetensors");
  expect_same_tensors(run_dir + "/model_f32.safetensors", ref_dir + "/model_f32.safetensors");

  Store store = Store::open(db());
  Store ref_store = Store::open(ref_db);
  EXPECT_EQ(store.run(run_id).status, RunStatus::finished);
  const std::string ref_id = fs::path(ref_dir).filename().string();
  expect_same_series(store, run_id, ref_store, ref_id,
                     {"train/loss", "train/accuracy", "train/lr", "test/accuracy", "test/loss",
                      "quant/f32_test_accuracy", "quant/ptq_test_accuracy", "qat_fake_quant/test_accuracy",
                      "quant/test_accuracy", "quant/accuracy_drop", "model/bytes", "model/int8_bytes"});
}

// A run killed with SIGKILL inside a stage's work that has no checkpoint of its own (structured
// pruning without fine-tuning: the baseline, the pruning, the file, the latencies): the resume
// starts from the checkpoint of the finished training (step 64; the stages then run from the
// first), not from the last periodic one (step 60), and trains no step of the main training again.
// checkpoint.keep = 1: the finished training's checkpoint is the one kept.
TEST_F(CliResumeFinetune, KillNineInAStageAfterTrainingResumesWithTheStagesNotTheTraining) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  // 64 steps an epoch: 1 training epoch, then the structured prune stage at step 64; a periodic
  // checkpoint every 20 steps (60 the last of the training).
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=1 --set train.batch_size=16 --set train.threads=1 --set seed=4"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=20"
      " --set checkpoint.keep=1 --set prune.method=l1-structured --set prune.ratio=0.5 --set prune.finetune_epochs=0";
  const std::string cfg = write("c.json", "{}");
  const std::string ref_db = (m_dir / "ref.db").string();
  const CmdResult ref =
      test::run_cmd("--db " + ref_db + " run " + cfg + " --set output.dir=" + (m_dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;

  // Killed once the stage has pruned (its latency measurements, the longest part, are still ahead).
  const SignalledRun k =
      signal_when("--db " + db() + " run " + cfg + " --json --set output.dir=" + (m_dir / "runs").string() + common,
                  SIGKILL, [](const nlohmann::json& j) { return j.value("event", "") == "prune"; });
  const std::string& run_id = k.run_id;
  ASSERT_TRUE(k.signalled) << "no prune event";
  ASSERT_EQ(k.killed_by, SIGKILL) << "the run ended before the kill";
  const std::string run_dir = only_subfolder(m_dir / "runs"), ref_dir = only_subfolder(m_dir / "ref");
  EXPECT_TRUE(fs::exists(run_dir + "/ckpt/step-000000000064/MANIFEST.json"));
  EXPECT_FALSE(fs::exists(run_dir + "/ckpt/step-000000000060")) << "checkpoint.keep = 1";

  const CmdResult resumed = test::run_cmd("--db " + db() + " resume " + run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("\"from_step\":64"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("\"training_done\":true"), std::string::npos) << resumed.out;
  // Not a step of the main training again, and its model file is not written again.
  EXPECT_EQ(count_lines(resumed.out, "phase", "train"), 0) << resumed.out;
  EXPECT_EQ(resumed.out.find("\"kind\":\"model\""), std::string::npos) << resumed.out;

  expect_same_tensors(run_dir + "/model.safetensors", ref_dir + "/model.safetensors");
  expect_same_tensors(run_dir + "/model.pruned.safetensors", ref_dir + "/model.pruned.safetensors");
  Store store = Store::open(db());
  Store ref_store = Store::open(ref_db);
  EXPECT_EQ(store.run(run_id).status, RunStatus::finished);
  const std::string ref_id = fs::path(ref_dir).filename().string();
  expect_same_series(store, run_id, ref_store, ref_id,
                     {"train/loss", "train/accuracy", "train/lr", "test/accuracy", "test/loss", "dense/test_accuracy",
                      "pruned_before_finetune/test_accuracy", "pruned/test_accuracy", "prune/accuracy_drop_pt",
                      "prune/flops_ratio", "prune/params_ratio", "model/params", "model/bytes", "model/dense_bytes"});
  EXPECT_EQ(count_events(store, run_id, "phase", "train"), 1);
  EXPECT_EQ(count_events(store, run_id, "resumed"), 1);
}

/// A run of a model-replacing stage killed with SIGKILL inside phase `phase` (`steps_in` steps into
/// it) and resumed: the resume is from the checkpoint of global step `from_step`, of `stage`'s
/// phase, rebuilds the replaced model's shapes from the checkpoint, skips what came before the phase
/// (no `skipped_metric` logged again) and ends with the uninterrupted run's `files` and `metrics`.
struct ReplacedResumeCase {
  std::string sets, phase, stage, skipped_metric;
  int64_t phase_first = 0, steps_in = 0, from_step = 0;
  std::vector<std::string> files, metrics;
};

void expect_replaced_model_resumes(const std::filesystem::path& dir, const std::string& db, const std::string& cfg,
                                   const ReplacedResumeCase& c) {
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=1 --set train.batch_size=16 --set train.threads=1 --set seed=4"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=20" +
      c.sets;
  const std::string ref_db = (dir / "ref.db").string();
  const CmdResult ref =
      test::run_cmd("--db " + ref_db + " run " + cfg + " --set output.dir=" + (dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;
  const KilledRun k =
      kill_inside_phase("--db " + db + " run " + cfg + " --json --set output.dir=" + (dir / "runs").string() + common,
                        c.phase, c.steps_in);
  ASSERT_EQ(k.phase_first, c.phase_first);
  ASSERT_GE(k.killed_at, c.from_step) << "the run ended before the kill";

  const CmdResult resumed = test::run_cmd("--db " + db + " resume " + k.run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("\"from_step\":" + std::to_string(c.from_step)), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("\"stage\":\"" + c.stage + "\""), std::string::npos) << resumed.out;
  EXPECT_EQ(count_lines(resumed.out, "phase", "train"), 0) << resumed.out;
  EXPECT_EQ(resumed.out.find(c.skipped_metric), std::string::npos) << resumed.out;

  const std::string run_dir = only_subfolder(dir / "runs"), ref_dir = only_subfolder(dir / "ref");
  for (const std::string& f : c.files)
    expect_same_tensors(run_dir + "/" + f, ref_dir + "/" + f);
  Store store = Store::open(db);
  Store ref_store = Store::open(ref_db);
  EXPECT_EQ(store.run(k.run_id).status, RunStatus::finished);
  expect_same_series(store, k.run_id, ref_store, fs::path(ref_dir).filename().string(), c.metrics);
  EXPECT_EQ(count_events(store, k.run_id, "resumed"), 1);
}

// Structured pruning's fine-tuning trains a smaller model: its checkpoints carry the dense weights,
// the resume prunes them again (the same channels) and loads the fine-tuning's weights into that
// model. Killed 45 steps into the fine-tuning (steps 65-192), resumed from step 100.
TEST_F(CliResumeFinetune, KillNineMidStructuredPruneFinetuneResumesItBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  expect_replaced_model_resumes(
      m_dir, db(), write("c.json", "{}"),
      {.sets = " --set prune.method=l1-structured --set prune.ratio=0.5 --set prune.finetune_epochs=2",
       .phase = "finetune",
       .stage = "prune",
       .skipped_metric = "dense/test_accuracy",
       .phase_first = 64,
       .steps_in = 45,
       .from_step = 100,
       .files = {"model.safetensors", "model.pruned.safetensors"},
       .metrics = {"train/loss", "train/accuracy", "train/lr", "test/accuracy", "test/loss", "dense/test_accuracy",
                   "pruned_before_finetune/test_accuracy", "pruned/test_accuracy", "prune/accuracy_drop_pt",
                   "prune/params_ratio", "model/params", "model/bytes", "model/dense_bytes", "prune/bytes_ratio"}});
}

// The same for the low-rank stage's fine-tuning: the resume factorises the dense weights again
// (the same ranks) and continues.
TEST_F(CliResumeFinetune, KillNineMidLowRankFinetuneResumesItBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  expect_replaced_model_resumes(
      m_dir, db(), write("c.json", "{}"),
      {.sets = " --set lowrank.method=svd --set lowrank.rank=16 --set lowrank.finetune_epochs=2",
       .phase = "finetune",
       .stage = "lowrank",
       .skipped_metric = "dense/test_accuracy",
       .phase_first = 64,
       .steps_in = 45,
       .from_step = 100,
       .files = {"model.safetensors", "model.lowrank.safetensors"},
       .metrics = {"train/loss", "train/accuracy", "train/lr", "test/accuracy", "test/loss", "dense/test_accuracy",
                   "lowrank_before_finetune/test_accuracy", "lowrank/test_accuracy", "lowrank/accuracy_drop_pt",
                   "lowrank/params_ratio", "model/params", "model/bytes", "model/dense_bytes", "lowrank/bytes_ratio"}});
}

// QAT after structured pruning: a checkpoint of QAT holds the smaller model's weights. The resume
// rebuilds that model first (the prune stage's state carries the dense weights), then continues QAT
// (steps 194-321 after the fine-tuning's 65-192 and the quantize stage's 193) and ends with the
// uninterrupted run's INT8 model.
TEST_F(CliResumeFinetune, KillNineInQatAfterStructuredPruningResumesOnThePrunedModel) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  expect_replaced_model_resumes(
      m_dir, db(), write("c.json", "{}"),
      {.sets = " --set prune.method=l1-structured --set prune.ratio=0.5 --set prune.finetune_epochs=2"
               " --set quant.mode=qat --set quant.qat_epochs=2 --set quant.calib_samples=128",
       .phase = "qat",
       .stage = "quant",
       .skipped_metric = "quant/ptq_test_accuracy",
       .phase_first = 193,
       .steps_in = 30,
       .from_step = 220,
       .files = {"model.pruned.safetensors", "model_int8.safetensors", "model_f32.safetensors"},
       .metrics = {"train/loss", "train/accuracy", "test/accuracy", "pruned/test_accuracy", "quant/f32_test_accuracy",
                   "quant/ptq_test_accuracy", "qat_fake_quant/test_accuracy", "quant/test_accuracy",
                   "model/int8_bytes"}});
}

// SIGTERM once the main training is done, before (or as) the PTQ stage starts: the run ends
// cancelled with the finished training checkpointed (trigger training_done, step 64 of the global
// batch), and its resume runs the quantize stage from there and ends with the uninterrupted run's
// INT8 model. On `devices` ranks (rank 0 writes the checkpoint, every rank resumes from it).
void sigterm_between_training_and_stage(const std::filesystem::path& dir, const std::string& db, const std::string& cfg,
                                        int devices) {
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=1 --set train.threads=1 --set seed=4"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=20"
      " --set quant.mode=ptq-static --set quant.calib_samples=128 --set compute.devices=" +
      std::to_string(devices) + " --set train.batch_size=" + std::to_string(16 / devices);  // 64 steps of 16 samples
  const std::string ref_db = (dir / "ref.db").string();
  const CmdResult ref =
      test::run_cmd("--db " + ref_db + " run " + cfg + " --set output.dir=" + (dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;

  const SignalledRun stopped =
      signal_when("--db " + db + " run " + cfg + " --json --set output.dir=" + (dir / "runs").string() + common,
                  SIGTERM, trained_model_saved);
  const std::string& run_id = stopped.run_id;
  ASSERT_TRUE(stopped.signalled) << "no model artifact";
  EXPECT_EQ(stopped.exit_code, 130);  // cancelled
  {
    Store store = Store::open(db);
    EXPECT_EQ(store.run(run_id).status, RunStatus::cancelled);
    std::map<int64_t, std::string> trigger;  // each checkpoint's step -> what wrote it
    for (const EventRecord& e : store.events(run_id))
      if (e.kind == "checkpoint")
        trigger[e.fields["step"].get<int64_t>()] = e.fields.value("trigger", "");
    EXPECT_EQ(trigger[64], "training_done");
  }

  const CmdResult resumed = test::run_cmd("--db " + db + " resume " + run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("\"from_step\":64"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("\"training_done\":true"), std::string::npos) << resumed.out;
  EXPECT_EQ(count_lines(resumed.out, "phase", "train"), 0) << resumed.out;

  std::string run_dir, ref_dir;  // a data-parallel run also leaves <id>.ranks folders beside its own
  for (const auto& e : fs::directory_iterator(dir / "runs"))
    if (e.path().extension() != ".ranks")
      run_dir = e.path().string();
  for (const auto& e : fs::directory_iterator(dir / "ref"))
    if (e.path().extension() != ".ranks")
      ref_dir = e.path().string();
  expect_same_tensors(run_dir + "/model.safetensors", ref_dir + "/model.safetensors");
  expect_same_tensors(run_dir + "/model_int8.safetensors", ref_dir + "/model_int8.safetensors");
  Store store = Store::open(db);
  Store ref_store = Store::open(ref_db);
  EXPECT_EQ(store.run(run_id).status, RunStatus::finished);
  const std::string ref_id = fs::path(ref_dir).filename().string();
  expect_same_series(store, run_id, ref_store, ref_id,
                     {"train/loss", "train/accuracy", "train/lr", "test/accuracy", "test/loss",
                      "quant/f32_test_accuracy", "quant/test_accuracy", "model/bytes", "model/int8_bytes"});
  EXPECT_EQ(count_events(store, run_id, "phase", "train"), 1);
}

TEST_F(CliResumeFinetune, SigtermBetweenTrainingAndAStageResumesWithTheStage) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  sigterm_between_training_and_stage(m_dir, db(), write("c.json", "{}"), 1);
}

TEST_F(CliResumeFinetune, SigtermBetweenTrainingAndAStageResumesWithTheStageOnTwoRanks) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  sigterm_between_training_and_stage(m_dir, db(), write("c.json", "{}"), 2);
}

// Distillation from a zoo teacher trained first in the run (steps 0-63), then the student (steps
// 64-191): a run ended by `sig` 50 steps into the student's training (past a checkpoint: every 20
// steps, and a stop writes one) resumes with the trained teacher's weights from that checkpoint
// (stage/distill/teacher/*): no teacher step again (no teacher phase, no teacher/* sample, a note
// says so), the teacher's series once, and the uninterrupted run's student, bit for bit. On
// `devices` ranks: rank 0 writes the checkpoint, every rank reads it before the teacher attaches.
void distill_resume_takes_the_trained_teacher(const std::filesystem::path& dir, const std::string& db,
                                              const std::string& cfg, int devices, int sig) {
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=2 --set train.threads=1 --set seed=4"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=20"
      " --set distill.teacher=zoo:mlp --set distill.teacher_epochs=1 --set compute.devices=" +
      std::to_string(devices) + " --set train.batch_size=" + std::to_string(16 / devices);  // 64 steps of 16 samples
  const std::string ref_db = (dir / "ref.db").string();
  const CmdResult ref =
      test::run_cmd("--db " + ref_db + " run " + cfg + " --set output.dir=" + (dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;
  // The teacher's evaluations print no student test accuracy (before: "test acc -100.00%").
  EXPECT_EQ(ref.out.find("-100.00%"), std::string::npos) << ref.out;

  const SignalledRun k =
      signal_when("--db " + db + " run " + cfg + " --json --set output.dir=" + (dir / "runs").string() + common, sig,
                  [](const nlohmann::json& j) {
                    return j.contains("metric") && j["metric"].get<std::string>().rfind("train/", 0) == 0 &&
                           j["step"].get<int64_t>() >= 64 + 50;
                  });
  const std::string& run_id = k.run_id;
  ASSERT_TRUE(k.signalled) << "no student step 114";
  if (sig == SIGKILL)
    ASSERT_EQ(k.killed_by, SIGKILL) << "the run ended before the kill";
  else
    ASSERT_EQ(k.exit_code, 130) << "the run was not cancelled by the stop";

  std::string run_dir, ref_dir;  // a data-parallel run also leaves <id>.ranks folders beside its own
  for (const auto& e : fs::directory_iterator(dir / "runs"))
    if (e.path().extension() != ".ranks")
      run_dir = e.path().string();
  for (const auto& e : fs::directory_iterator(dir / "ref"))
    if (e.path().extension() != ".ranks")
      ref_dir = e.path().string();
  // The checkpoint carries the trained teacher (the checkpoint grows by the teacher's size).
  {
    const std::optional<LoadedCheckpoint> c = load_newest_checkpoint(run_dir + "/ckpt");
    ASSERT_TRUE(c);
    ASSERT_GT(c->info.step, 64);
    const nlohmann::json stages = c->data.state.value("stages", nlohmann::json::object());
    EXPECT_TRUE(stages.contains("distill") && stages["distill"].is_object() &&
                stages["distill"].value("teacher_trained", false))
        << stages.dump();
    int teacher_tensors = 0;
    for (const auto& [name, t] : c->data.tensors)
      if (name.rfind("stage/distill/teacher/", 0) == 0) {
        ++teacher_tensors;
        if (name == "stage/distill/teacher/0.weight")
          EXPECT_EQ(t.shape(), (Shape{512, 784}));
      }
    EXPECT_EQ(teacher_tensors, 6);  // zoo:mlp: three linear layers' weights and biases
  }

  const CmdResult resumed = test::run_cmd("--db " + db + " resume " + run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  int64_t from_step = -1;
  int teacher_samples = 0, notes = 0;
  size_t at = 0;
  while (at < resumed.out.size()) {
    const size_t end = std::min(resumed.out.find('\n', at), resumed.out.size());
    const auto j = nlohmann::json::parse(resumed.out.substr(at, end - at), nullptr, false);
    at = end + 1;
    if (!j.is_object())
      continue;
    if (j.value("event", "") == "resumed")
      from_step = j.value("from_step", int64_t{-1});
    if (j.value("event", "") == "note" &&
        j.value("text", "").find("teacher's trained weights come from the checkpoint") != std::string::npos)
      ++notes;
    teacher_samples += j.contains("metric") && j["metric"].get<std::string>().rfind("teacher/", 0) == 0;
  }
  EXPECT_GT(from_step, 64) << resumed.out;
  EXPECT_LT(from_step, 192) << resumed.out;
  EXPECT_EQ(count_lines(resumed.out, "phase", "teacher"), 0) << "the teacher was trained again";
  EXPECT_EQ(teacher_samples, 0) << "the teacher was trained again";
  EXPECT_EQ(notes, 1) << resumed.out;

  expect_same_tensors(run_dir + "/model.safetensors", ref_dir + "/model.safetensors");
  Store store = Store::open(db);
  Store ref_store = Store::open(ref_db);
  EXPECT_EQ(store.run(run_id).status, RunStatus::finished);
  const std::string ref_id = fs::path(ref_dir).filename().string();
  expect_same_series(store, run_id, ref_store, ref_id,
                     {"teacher/train/loss", "teacher/train/accuracy", "teacher/test/accuracy",
                      "distill/teacher_accuracy", "train/lr", "test/accuracy", "test/loss"});
  // The means over the steps since the previous log point: a stop (or a checkpoint) between two
  // log points leaves the first window after the resume with the steps since the resume only (so
  // for any resumed training, not for distillation only). That one sample is compared by step.
  for (const char* m : {"train/loss", "train/accuracy", "distill/kd_loss"}) {
    const std::vector<Point> a = store.series(run_id, m), b = ref_store.series(ref_id, m);
    ASSERT_EQ(a.size(), b.size()) << m;
    ASSERT_FALSE(a.empty()) << m;
    bool logged_at_resume = false, first_after = true;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].step, b[i].step) << m;
      logged_at_resume = logged_at_resume || b[i].step == from_step;
      const bool cut_window = a[i].step > from_step && first_after && !logged_at_resume;
      first_after = first_after && a[i].step <= from_step;
      if (!cut_window)
        EXPECT_EQ(a[i].value, b[i].value) << m << " at step " << a[i].step << " (resumed from " << from_step << ")";
    }
  }
  EXPECT_EQ(count_events(store, run_id, "phase", "teacher"), 1);
  EXPECT_EQ(count_events(store, run_id, "resumed"), 1);
}

TEST_F(CliResumeFinetune, KillNineInDistillationResumesWithTheTrainedTeacherBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  distill_resume_takes_the_trained_teacher(m_dir, db(), write("c.json", "{}"), 1, SIGKILL);
}

TEST_F(CliResumeFinetune, StopInDistillationOnTwoRanksResumesWithTheTrainedTeacherBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  distill_resume_takes_the_trained_teacher(m_dir, db(), write("c.json", "{}"), 2, SIGTERM);
}

}  // namespace
}  // namespace lathe
