// Issue 11 item 6: an empty training or test set is refused at set-up with a DataError naming the
// split and its files, before the run's folder exists or the run is registered (on_start).
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/run/trainer.h"
#include "tests/data/data_test_util.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

using test::expect_data_error;
using test::idx_bytes;
using test::TempDir;
using test::write_bytes;

class EmptyDataset : public ::testing::Test {
 protected:
  /// Writes an images/labels pair of `count` 4 x 4 images under `stem`.
  void write_pair(const std::string& stem, uint32_t count) {
    write_bytes(dir.file(stem + "-images"), idx_bytes({count, 4, 4}, std::vector<uint8_t>(count * 16, 7)));
    write_bytes(dir.file(stem + "-labels"), idx_bytes({count}, std::vector<uint8_t>(count, 1)));
  }
  ExperimentConfig config() {
    return test::config_from({"data.dataset=idx", "data.train_images=" + dir.file("train-images"),
                              "data.train_labels=" + dir.file("train-labels"),
                              "data.test_images=" + dir.file("test-images"),
                              "data.test_labels=" + dir.file("test-labels"), "model.zoo=custom",
                              R"(model.layers=[{"type":"flatten"},{"type":"linear","out":2}])", "train.epochs=1",
                              "train.batch_size=4", "compute.backend=reference", "output.dir=" + dir.file("runs")});
  }
  /// Runs the experiment, expecting a DataError with `words`; checks nothing was created.
  void expect_refused(const std::vector<std::string>& words) {
    RunOptions options;
    options.run_id = "empty-data";
    bool started = false;
    options.on_start = [&](const std::string&, const std::string&, const std::string&) { started = true; };
    const ExperimentConfig cfg = config();
    expect_data_error([&] { run_experiment(cfg, options); }, words);
    EXPECT_FALSE(started) << "the run was registered before its data was checked";
    EXPECT_FALSE(std::filesystem::exists(dir.file("runs") + "/empty-data")) << "a run folder was created";
  }
  TempDir dir;
};

TEST_F(EmptyDataset, NoTrainingImagesIsRefusedNamingTheFile) {
  write_pair("train", 0);
  write_pair("test", 4);
  expect_refused({"training set", "0 images", dir.file("train-images")});
}

TEST_F(EmptyDataset, NoTestImagesIsRefusedNamingTheFile) {
  write_pair("train", 8);
  write_pair("test", 0);
  expect_refused({"test set", "0 images", dir.file("test-images")});
}

}  // namespace
}  // namespace lathe
