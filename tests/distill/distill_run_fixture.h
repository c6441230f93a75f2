// A fixture for distillation tests that run the real (tiny) pipeline on Fashion-MNIST: skipped
// without the dataset, a scratch folder per process (named by the test file's prefix) removed
// afterwards, and the small config the runs share.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/fashion_mnist.h"

namespace lathe::test {

class DistillRunFixture : public ::testing::Test {
 protected:
  explicit DistillRunFixture(std::string folder_prefix) : m_prefix(std::move(folder_prefix)) {}
  void SetUp() override {
    if (!have_fashion_mnist())
      GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
    m_dir = std::filesystem::temp_directory_path() / (m_prefix + std::to_string(::getpid()));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }
  /// key=value settings of a one-epoch student run on 512 images, writing into the scratch folder,
  /// then `extra`.
  std::vector<std::string> tiny(const std::vector<std::string>& extra) const {
    std::vector<std::string> s{
        "model.zoo=student",   "train.epochs=1",      "data.train_subset=512", "data.test_subset=300",
        "train.batch_size=64", "compute.backend=cpu", "train.threads=1",       "output.dir=" + m_dir.string()};
    s.insert(s.end(), extra.begin(), extra.end());
    return s;
  }
  std::string m_prefix;
  std::filesystem::path m_dir;
};

}  // namespace lathe::test
