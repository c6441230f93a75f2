// Checkpoints and resume through the real lathe-cli (issue 14): kill -9 at a few steps of a run
// with checkpoint.every_steps=50, each `lathe-cli resume` continuing it, ends bit-identical to an
// uninterrupted run with a sound store (bench/kill_resume.py, the 20-kill acceptance, in short);
// a spot notice from a local stand-in for the EC2 endpoint makes the run write an emergency
// checkpoint and exit `interrupted` inside the notice window, and the resumed run loses no step.
// Both on one process and on two data-parallel ranks, started by lathe-cli or, as srun starts
// them on two nodes, each on its own. The spot supervisor (cost.interruptions_per_hour) on one
// process and on two ranks: every instance's ranks gone, one store run, the uninterrupted weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/data/dataset.h"
#include "engine/nn/safetensors.h"
#include "engine/store/store.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/fake_metadata_server.h"
#include "tests/support/fashion_mnist.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::cli_binary;
using test::CmdResult;

using test::have_fashion_mnist;

void expect_same_weights(const std::string& got, const std::string& want) {
  const SafetensorsFile a = load_safetensors(got);
  const SafetensorsFile b = load_safetensors(want);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    ASSERT_EQ(a.tensors[i].second.nbytes(), b.tensors[i].second.nbytes());
    EXPECT_EQ(std::memcmp(a.tensors[i].second.raw(), b.tensors[i].second.raw(), a.tensors[i].second.nbytes()), 0)
        << a.tensors[i].first;
  }
}

using test::only_subfolder;

class CliResume : public test::Cli {
 protected:
  void SetUp() override {
    test::Cli::SetUp();
    m_dir /= ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(m_dir);
  }
};

TEST_F(CliResume, KillNineAtAFewStepsThenResumeEndsBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string script = LATHE_SOURCE_DIR "/bench/kill_resume.py";
  const CmdResult r = test::run_shell("python3 " + script + " --cli " + cli_binary() +
                                      " --kills 3 --model mlp --train-subset 1024 --test-subset 200 --epochs 2"
                                      " --batch-size 16 --every-steps 50 --seed 5");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("summary: 3 kills"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weights identical"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST_F(CliResume, KillNineOnTwoRanksThenResumeEndsBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string script = LATHE_SOURCE_DIR "/bench/kill_resume.py";
  // Plain data parallel (rank 0's optimizer state is everyone's), then ZeRO-1 (each checkpoint
  // gathers the shards: without the gather the resumed rank 1 starts with zero momentum and the
  // weights differ).
  for (const char* zero : {"", " --shard-optimizer"}) {
    const CmdResult r = test::run_shell("python3 " + script + " --cli " + cli_binary() +
                                        " --kills 3 --model mlp --train-subset 1024 --test-subset 200 --epochs 2"
                                        " --batch-size 16 --every-steps 10 --seed 5 --devices 2" +
                                        zero);
    EXPECT_EQ(r.code, 0) << zero << "\n" << r.out;
    EXPECT_NE(r.out.find("summary: 3 kills"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("weights identical"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  }
}

TEST_F(CliResume, KillNineOfRankZeroUnderSrunThenEveryRankResumesBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  // Two "nodes": each rank started on its own with srun's variables, meeting in a shared folder.
  // The kill takes rank 0 alone; rank 1 must end by itself within compute.timeout_s; then every
  // rank runs `lathe-cli resume RUN` (a new srun step) and the run ends as if never killed.
  const std::string script = LATHE_SOURCE_DIR "/bench/kill_resume.py";
  const CmdResult r = test::run_shell("python3 " + script + " --cli " + cli_binary() +
                                      " --kills 2 --model mlp --train-subset 1024 --test-subset 200 --epochs 2"
                                      " --batch-size 16 --every-steps 10 --seed 5 --devices 2 --launcher slurm"
                                      " --timeout-s 5");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("summary: 2 kills"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("weights identical"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

class CliSpotNotice : public CliResume, public ::testing::WithParamInterface<int> {};

TEST_P(CliSpotNotice, CheckpointsInsideTheWindowAndResumeLosesNoStep) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  test::FakeMetadataServer server(m_dir.string());
  // GetParam() ranks: with 2, every rank polls the endpoint, the stop is agreed, rank 0 writes
  // the emergency checkpoint, and `resume` starts both ranks again.
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=3 --set train.batch_size=16"
      " --set train.threads=1 --set seed=3 --set data.train_subset=4096"
      " --set data.test_subset=200 --set checkpoint.every_steps=50 --set compute.devices=" +
      std::to_string(GetParam());
  const CmdResult ref = test::run_cmd("--db " + (m_dir / "ref.db").string() + " run " + write("c.json", "{}") +
                                      " --json --set output.dir=" + (m_dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;

  // The run under test: the notice arrives once it is past step 70 (between two checkpoints).
  const std::string cmd = cli_binary() + " --db " + db() + " run " + write("c.json", "{}") +
                          " --json --set output.dir=" + (m_dir / "runs").string() + common +
                          " --set cost.notice_provider=ec2 --set cost.notice_url=" + server.url +
                          " --set cost.notice_poll_s=0.1 --set cost.notice_s=120";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[1 << 16];
  std::string run_id, run_dir;
  int64_t last_step = 0;
  bool noticed = false;
  auto t_notice = std::chrono::steady_clock::now();
  while (fgets(line, sizeof line, p)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded())
      continue;
    if (j.value("event", "") == "started") {
      run_id = j["run_id"];
      run_dir = j["run_dir"];
    }
    if (j.contains("metric") && j["metric"].get<std::string>().rfind("train/", 0) == 0)
      last_step = std::max(last_step, j["step"].get<int64_t>());
    if (!noticed && last_step > 70) {
      server.give_notice();
      noticed = true;
      t_notice = std::chrono::steady_clock::now();
    }
  }
  const int status = pclose(p);
  const double to_exit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_notice).count();
  ASSERT_TRUE(noticed) << "the run ended before step 70";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 75);  // interrupted
  EXPECT_LT(to_exit_s, 120.0);         // inside the notice window (in practice well under a second)

  int64_t ckpt_step = -1;
  {
    Store store = Store::open(db());
    EXPECT_EQ(store.run(run_id).status, RunStatus::interrupted);
    bool notice_event = false;
    std::map<int64_t, std::string> trigger;  // each checkpoint's step -> what wrote it
    for (const EventRecord& e : store.events(run_id)) {
      notice_event = notice_event || e.kind == "spot/notice";
      if (e.kind == "spot/checkpoint")
        ckpt_step = e.fields["step"];
      if (e.kind == "checkpoint")
        trigger[e.fields["step"].get<int64_t>()] = e.fields.value("trigger", "");
    }
    EXPECT_TRUE(notice_event);
    // The emergency one, written at the stop the notice caused (not a periodic one; under load the
    // stop may fall on a multiple of checkpoint.every_steps, when that is the checkpoint it writes).
    EXPECT_EQ(trigger[ckpt_step], "stop");
  }
  ASSERT_GT(ckpt_step, 70);
  EXPECT_TRUE(fs::exists(run_dir + "/ckpt/step-" + std::string(12 - std::to_string(ckpt_step).size(), '0') +
                         std::to_string(ckpt_step) + "/MANIFEST.json"));

  server.clear_notice();  // the resumed run is on a new machine
  const CmdResult resumed = test::run_cmd("--db " + db() + " resume " + run_id + " --json");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("\"from_step\":" + std::to_string(ckpt_step)), std::string::npos) << resumed.out;
  {
    Store store = Store::open(db());
    EXPECT_EQ(store.run(run_id).status, RunStatus::finished);
  }
  const CmdResult again = test::run_cmd("--db " + db() + " resume " + run_id);
  EXPECT_EQ(again.code, 2) << again.out;
  EXPECT_NE(again.out.find("is finished: only interrupted, cancelled or failed runs can be resumed"), std::string::npos)
      << again.out;
  // No step lost or changed: the final weights are the uninterrupted run's.
  std::string ref_dir;
  for (const auto& e : fs::directory_iterator(m_dir / "ref"))
    if (e.path().extension() != ".ranks")  // a data-parallel run's rendezvous and worker logs
      ref_dir = e.path().string();
  expect_same_weights(run_dir + "/model.safetensors", ref_dir + "/model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Ranks, CliSpotNotice, ::testing::Values(1, 2));

/// The processes whose command line mentions `text` (a run id: rank 0, its workers, a resume's).
std::vector<std::string> processes_mentioning(const std::string& text) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(text) != std::string::npos)
      out.push_back(name + ": " + cmdline);
  }
  return out;
}

/// The notice window ("5": the checkpoint always makes it; "0.01": SIGKILL before it does) and the ranks.
class CliSpot : public CliResume, public ::testing::WithParamInterface<std::tuple<const char*, int>> {};

TEST_P(CliSpot, SupervisorInterruptsRestartsAndEndsBitIdentical) {
  if (!have_fashion_mnist())
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string window = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  // Two ranks: 32 steps an epoch of 2 x 16 samples, checkpoints every 10 (a kill loses at most 10).
  const std::string common =
      " --set model.zoo=mlp --set train.epochs=2 --set train.batch_size=16 --set train.threads=1 --set seed=3"
      " --set data.train_subset=1024 --set data.test_subset=200 --set checkpoint.every_steps=" +
      std::string(ranks == 1 ? "50" : "10") + " --set compute.devices=" + std::to_string(ranks);
  const std::string cfg = write("c.json", "{}");
  const CmdResult ref = test::run_cmd("--db " + (m_dir / "ref.db").string() + " run " + cfg +
                                      " --set output.dir=" + (m_dir / "ref").string() + common);
  ASSERT_EQ(ref.code, 0) << ref.out;
  // seed 3 draws its first interruption 0.2 s in (at 3600/h; 0.8 s at 900/h): it lands as soon as
  // the first child trains. Two ranks take a second or two to set up again after each restart, and
  // a notice due by then lands as soon as they are up: 900/h keeps it to a few interruptions.
  const CmdResult r = test::run_cmd("--db " + db() + " run " + cfg + " --set output.dir=" + (m_dir / "runs").string() +
                                    common + " --set cost.interruptions_per_hour=" + (ranks == 1 ? "3600" : "900") +
                                    " --set cost.restart_s=0.1 --set cost.notice_s=" + window);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("lathe: spot supervisor: interruption 1 at"), std::string::npos) << r.out;
  // The run's folder and, with 2 ranks, its <id>.ranks folder (rendezvous and worker logs, the
  // resumes' in sub-folders): nothing else beside them.
  std::string run_dir, ranks_dir;
  int others = 0;
  for (const auto& e : fs::directory_iterator(m_dir / "runs")) {
    std::string& slot = e.path().extension() == ".ranks" ? ranks_dir : run_dir;
    if (slot.empty())
      slot = e.path().string();
    else
      ++others;
  }
  ASSERT_FALSE(run_dir.empty());
  EXPECT_EQ(others, 0);
  const std::string id = fs::path(run_dir).filename().string();
  EXPECT_EQ(ranks_dir.empty(), ranks == 1) << ranks_dir;
  if (ranks > 1)
    EXPECT_EQ(fs::path(ranks_dir).filename().string(), id + ".ranks");
  // No half-written checkpoint of a killed instance is left: the resumed rank 0 removes them.
  for (const auto& e : fs::directory_iterator(run_dir + "/ckpt"))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
  // Every rank of every instance is gone (the workers too, not only rank 0).
  EXPECT_TRUE(processes_mentioning(id).empty()) << ::testing::PrintToString(processes_mentioning(id));
  Store store = Store::open(db());
  const RunPage page = store.list_runs();
  ASSERT_EQ(page.runs.size(), 1u);  // one run in the store, however many instances trained it
  EXPECT_EQ(page.runs[0].run.id, id);
  EXPECT_EQ(store.run(id).status, RunStatus::finished);
  EXPECT_EQ(store.summary(id, "dist/world_size") ? static_cast<int>(store.summary(id, "dist/world_size")->last) : 1,
            ranks);
  const auto interruptions = store.summary(id, "spot/interruptions");
  ASSERT_TRUE(interruptions);
  EXPECT_GE(interruptions->last, 1);
  int resumed = 0, interruption_events = 0;
  for (const EventRecord& e : store.events(id)) {
    resumed += e.kind == "resumed";
    interruption_events += e.kind == "spot/interruption";
    if (e.kind == "spot/summary")
      EXPECT_EQ(e.fields.value("ranks", 0), ranks);
  }
  // The supervisor logs every interruption itself; a restarted child logs `resumed`, unless the
  // machine is taken away again before the store has that event (kill -9 within milliseconds).
  EXPECT_EQ(interruption_events, static_cast<int>(interruptions->last));
  EXPECT_EQ(store.summary(id, "spot/restarts")->last, interruptions->last);
  if (window == "5")
    EXPECT_EQ(resumed, static_cast<int>(interruptions->last));
  else
    EXPECT_TRUE(resumed >= 1 && resumed <= static_cast<int>(interruptions->last)) << resumed;
  for (const char* m : {"spot/restarts", "spot/steps_redone", "spot/restart_wait_s", "cost/usd_on_demand"})
    EXPECT_TRUE(store.summary(id, m)) << m;
  if (window == "5") {
    EXPECT_EQ(store.summary(id, "spot/steps_redone")->last, 0);  // every notice got its emergency checkpoint
    EXPECT_EQ(store.summary(id, "spot/kills")->last, 0);
  } else {
    EXPECT_GE(store.summary(id, "spot/kills")->last, 1) << r.out;  // a 10 ms window: the machine goes first
  }
  std::string ref_dir;
  for (const auto& e : fs::directory_iterator(m_dir / "ref"))
    if (e.path().extension() != ".ranks")
      ref_dir = e.path().string();
  expect_same_weights(run_dir + "/model.safetensors", ref_dir + "/model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(NoticeWindow, CliSpot,
                         ::testing::Combine(::testing::Values("5", "0.01"), ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<const char*, int>>& info) {
                           return std::string(std::get<0>(info.param)[0] == '5' ? "Window5s" : "Window10ms") + "Ranks" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST_F(CliResume, OnlyInterruptedOrCancelledRunsResume) {
  const CmdResult r = test::run_cmd("--db " + db() + " resume nosuchrun");
  EXPECT_EQ(r.code, 2) << r.out;
}

}  // namespace
}  // namespace lathe
