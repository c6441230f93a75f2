// IDX image/label pairs into Datasets, Fashion-MNIST folder lookup (with and without .gz) and the
// errors that tell the user what to install or configure; subset().
#include <gtest/gtest.h>

#include "engine/data/dataset.h"
#include "engine/data/idx_reader.h"
#include "tests/data/data_test_util.h"

namespace lathe {
namespace {

using test::expect_data_error;
using test::idx_bytes;
using test::TempDir;
using test::write_bytes;

/// count images of rows x cols with pixel (i, p) = (i * 31 + p) % 256, labels as given.
void write_pair(const std::string& images, const std::string& labels, uint32_t count, uint32_t rows, uint32_t cols,
                const std::vector<uint8_t>& label_values, bool gzip = false) {
  std::vector<uint8_t> pixels(count * rows * cols);
  for (uint32_t i = 0; i < count; ++i)
    for (uint32_t p = 0; p < rows * cols; ++p)
      pixels[i * rows * cols + p] = static_cast<uint8_t>((i * 31 + p) % 256);
  write_bytes(images, idx_bytes({count, rows, cols}, pixels), gzip);
  write_bytes(labels, idx_bytes({static_cast<uint32_t>(label_values.size())}, label_values), gzip);
}

TEST(Dataset, LoadsAnIdxPair) {
  TempDir dir;
  write_pair(dir.file("img"), dir.file("lab"), 5, 3, 4, {2, 0, 4, 1, 2});
  Dataset ds = load_idx_pair(dir.file("img"), dir.file("lab"));
  EXPECT_EQ(ds.count, 5);
  EXPECT_EQ(ds.rows, 3);
  EXPECT_EQ(ds.cols, 4);
  EXPECT_EQ(ds.num_classes, 5);  // inferred: largest label + 1
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{2, 0, 4, 1, 2}));
  ASSERT_EQ(ds.images.size(), 60u);
  EXPECT_EQ(ds.image(3)[5], (3 * 31 + 5) % 256);
  EXPECT_NE(ds.source.find(dir.file("img")), std::string::npos);
  EXPECT_EQ(load_idx_pair(dir.file("img"), dir.file("lab"), 10).num_classes, 10);
}

TEST(Dataset, CountMismatchNamesBothCounts) {
  TempDir dir;
  write_pair(dir.file("imgs"), dir.file("labs"), 6, 2, 2, {1, 2, 3, 4, 5});
  expect_data_error([&] { load_idx_pair(dir.file("imgs"), dir.file("labs")); },
                    {"count mismatch", dir.file("imgs"), dir.file("labs"), "6 images", "5 labels"});
}

TEST(Dataset, LabelOutOfRange) {
  TempDir dir;
  write_pair(dir.file("imgs"), dir.file("labs"), 4, 2, 2, {1, 9, 0, 12});
  expect_data_error([&] { load_idx_pair(dir.file("imgs"), dir.file("labs"), 10); },
                    {dir.file("labs"), "label 12", "index 3", "out of range", "[0, 10)"});
}

TEST(Dataset, SwappedFilesAreRejected) {
  TempDir dir;
  write_pair(dir.file("imgs"), dir.file("labs"), 2, 2, 2, {0, 1});
  expect_data_error([&] { load_idx_pair(dir.file("labs"), dir.file("imgs")); },
                    {dir.file("labs"), "wrong magic number 0x00000801", "0x00000803"});
}

TEST(Dataset, Subset) {
  TempDir dir;
  write_pair(dir.file("img"), dir.file("lab"), 5, 2, 3, {4, 3, 2, 1, 0});
  const Dataset ds = load_idx_pair(dir.file("img"), dir.file("lab"));
  const Dataset s = subset(ds, 2);
  EXPECT_EQ(s.count, 2);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.cols, 3);
  EXPECT_EQ(s.num_classes, 5);
  EXPECT_EQ(s.labels, (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(s.images, std::vector<uint8_t>(ds.images.begin(), ds.images.begin() + 12));
  EXPECT_EQ(subset(ds, 99).count, 5);
  EXPECT_EQ(subset(ds, 0).images.size(), 0u);
  EXPECT_THROW(subset(ds, -1), Error);
}

TEST(FashionMnistFolder, DefaultIsTheDebianPackageLocation) {
  EXPECT_EQ(default_fashion_mnist_dir(), "/usr/share/datasets/fashion-mnist");
}

TEST(FashionMnistFolder, LoadsFromAFolderWithAndWithoutGz) {
  TempDir dir;
  // A miniature Fashion-MNIST: training files compressed, test files plain.
  write_pair(dir.file("train-images-idx3-ubyte.gz"), dir.file("train-labels-idx1-ubyte.gz"), 6, 28, 28,
             {9, 0, 0, 3, 0, 2}, /*gzip=*/true);
  write_pair(dir.file("t10k-images-idx3-ubyte"), dir.file("t10k-labels-idx1-ubyte"), 3, 28, 28, {9, 2, 1});
  TrainTest tt = load_fashion_mnist(dir.path());
  EXPECT_EQ(tt.train.count, 6);
  EXPECT_EQ(tt.test.count, 3);
  EXPECT_EQ(tt.train.num_classes, 10);
  EXPECT_EQ(tt.test.labels, (std::vector<int32_t>{9, 2, 1}));
  EXPECT_NE(tt.train.source.find("train-images-idx3-ubyte.gz"), std::string::npos);
}

TEST(FashionMnistFolder, MissingFolderSaysWhatToInstall) {
  TempDir dir;
  const std::string missing = dir.file("no-such-folder");
  expect_data_error([&] { load_fashion_mnist(missing); },
                    {missing, "does not exist", "apt-get install dataset-fashion-mnist", "data.path"});
}

TEST(FashionMnistFolder, MissingFileIsNamed) {
  TempDir dir;
  write_pair(dir.file("train-images-idx3-ubyte"), dir.file("train-labels-idx1-ubyte"), 2, 28, 28, {1, 2});
  write_pair(dir.file("t10k-images-idx3-ubyte"), dir.file("unrelated"), 2, 28, 28, {1, 2});
  expect_data_error([&] { load_fashion_mnist(dir.path()); },
                    {dir.path(), "t10k-labels-idx1-ubyte", "apt-get install dataset-fashion-mnist", "data.path"});
}

TEST(FashionMnistFolder, LabelOutOfRangeForTenClasses) {
  TempDir dir;
  write_pair(dir.file("train-images-idx3-ubyte"), dir.file("train-labels-idx1-ubyte"), 2, 28, 28, {1, 10});
  write_pair(dir.file("t10k-images-idx3-ubyte"), dir.file("t10k-labels-idx1-ubyte"), 2, 28, 28, {1, 2});
  expect_data_error([&] { load_fashion_mnist(dir.path()); }, {"train-labels-idx1-ubyte", "label 10", "[0, 10)"});
}

}  // namespace
}  // namespace lathe
