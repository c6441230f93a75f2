// Checkpoint folders: a round trip keeps every tensor and the state, `keep` newest stay, and a
// truncated or bit-flipped newest checkpoint is detected and the previous one used, saying so;
// the temporaries a killed writer left are removed, a live writer's kept.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/run/checkpoint.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = (fs::temp_directory_path() / ("lathe-ckpt-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name()))
              .string();
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  CheckpointData data_for(int64_t step) {
    Rng rng(static_cast<uint64_t>(step));
    CheckpointData d;
    d.state = {{"epoch", step / 10}, {"run_id", "r1"}, {"rng", {{"shuffle", rng.state()}}}};
    d.tensors.emplace_back("model/fc.weight", test::random_tensor({4, 3}, rng));
    d.tensors.emplace_back("optim/fc.weight.momentum_buffer", test::random_tensor({4, 3}, rng));
    return d;
  }
  std::string dir;
};

TEST_F(CheckpointTest, RoundTripKeepsTensorsAndState) {
  const CheckpointData d = data_for(120);
  const CheckpointInfo info = write_checkpoint(dir, 120, d, 3);
  EXPECT_EQ(info.step, 120);
  EXPECT_GT(info.bytes, 2 * 12 * 4);
  EXPECT_GE(info.write_s, 0);
  EXPECT_EQ(fs::path(info.path).filename(), "step-000000000120");
  EXPECT_EQ(verify_checkpoint(info.path), "");
  auto loaded = load_newest_checkpoint(dir);
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(loaded->skipped.empty());
  EXPECT_EQ(loaded->info.step, 120);
  EXPECT_EQ(loaded->data.state["run_id"], "r1");
  EXPECT_EQ(loaded->data.state["format"], kCheckpointFormat);
  EXPECT_EQ(loaded->data.state["rng"]["shuffle"].get<uint64_t>(), d.state["rng"]["shuffle"].get<uint64_t>());
  ASSERT_EQ(loaded->data.tensors.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(loaded->data.tensors[i].first, d.tensors[i].first);
    EXPECT_EQ(test::mismatches(loaded->data.tensors[i].second, d.tensors[i].second), 0);
  }
  // No temporary folder is left behind.
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp", 0), std::string::npos) << e.path();
}

TEST_F(CheckpointTest, KeepsTheNewestAndSortsByStepNotByName) {
  for (int64_t step : {5, 50, 500, 5000})
    write_checkpoint(dir, step, data_for(step), 3);
  const auto all = list_checkpoints(dir);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(fs::path(all[0]).filename(), "step-000000000050");
  EXPECT_EQ(fs::path(all[2]).filename(), "step-000000005000");
  // The same step again replaces it.
  write_checkpoint(dir, 5000, data_for(5000), 3);
  EXPECT_EQ(list_checkpoints(dir).size(), 3u);
  EXPECT_TRUE(list_checkpoints(dir + "/absent").empty());
  EXPECT_FALSE(load_newest_checkpoint(dir + "/absent"));
}

TEST_F(CheckpointTest, StaleTemporariesOfKilledWritersGoOursStay) {
  write_checkpoint(dir, 50, data_for(50), 3);
  const std::string me = std::to_string(::getpid());
  // Killed writers' half-written folders; one whose pid ends like ours ("1" + ours) is theirs too.
  const std::vector<std::string> theirs = {".tmp-step-000000000061-" + std::to_string(::getpid() + 1),
                                           ".tmp-step-000000000062-1" + me};
  const std::string ours = ".tmp-step-000000000063-" + me;  // a write of this process under way
  for (const std::string& t : theirs)
    fs::create_directories(fs::path(dir) / t / "x");
  fs::create_directories(fs::path(dir) / ours);
  remove_stale_checkpoint_temporaries(dir);
  for (const std::string& t : theirs)
    EXPECT_FALSE(fs::exists(fs::path(dir) / t)) << t;
  EXPECT_TRUE(fs::exists(fs::path(dir) / ours));
  EXPECT_EQ(list_checkpoints(dir).size(), 1u);  // the checkpoint itself stays
  EXPECT_EQ(verify_checkpoint(list_checkpoints(dir)[0]), "");
  remove_stale_checkpoint_temporaries(dir + "/absent");  // no folder: nothing to do, no error
}

TEST_F(CheckpointTest, TruncatedNewestIsDetectedAndThePreviousUsed) {
  write_checkpoint(dir, 50, data_for(50), 3);
  const CheckpointInfo newest = write_checkpoint(dir, 100, data_for(100), 3);
  const std::string file = newest.path + "/tensors.safetensors";
  fs::resize_file(file, fs::file_size(file) / 2);  // a torn write
  EXPECT_NE(verify_checkpoint(newest.path).find("truncated"), std::string::npos) << verify_checkpoint(newest.path);
  auto loaded = load_newest_checkpoint(dir);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->info.step, 50);
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_NE(loaded->skipped[0].find("step-000000000100"), std::string::npos) << loaded->skipped[0];
  EXPECT_NE(loaded->skipped[0].find("using the previous one, step 50"), std::string::npos) << loaded->skipped[0];
}

TEST_F(CheckpointTest, BitFlippedNewestIsDetectedAndThePreviousUsed) {
  write_checkpoint(dir, 50, data_for(50), 3);
  const CheckpointInfo newest = write_checkpoint(dir, 100, data_for(100), 3);
  const std::string file = newest.path + "/tensors.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(-5, std::ios::end);
    f.write(&c, 1);
  }
  EXPECT_NE(verify_checkpoint(newest.path).find("sha256"), std::string::npos) << verify_checkpoint(newest.path);
  auto loaded = load_newest_checkpoint(dir);
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->info.step, 50);
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_NE(loaded->skipped[0].find("corrupt"), std::string::npos) << loaded->skipped[0];
}

TEST_F(CheckpointTest, MissingManifestOrStateAndNoValidOneAtAll) {
  const CheckpointInfo a = write_checkpoint(dir, 10, data_for(10), 3);
  const CheckpointInfo b = write_checkpoint(dir, 20, data_for(20), 3);
  fs::remove(b.path + "/MANIFEST.json");  // killed before the manifest: never renamed in practice
  fs::remove(a.path + "/state.json");
  EXPECT_NE(verify_checkpoint(a.path).find("state.json is missing"), std::string::npos);
  std::vector<std::string> why;
  EXPECT_FALSE(load_newest_checkpoint(dir, &why));
  EXPECT_EQ(why.size(), 2u);
}

}  // namespace
}  // namespace lathe
