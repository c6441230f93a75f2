// The real Fashion-MNIST from the Debian package (skipped, saying why, when it is not installed):
// sizes, class balance, the first labels and the pixel statistics behind kFashionMean / kFashionStd.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/data/dataset.h"
#include "engine/data/loader.h"

namespace lathe {
namespace {

class FashionMnist : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::is_directory(default_fashion_mnist_dir()))
      return;
    s_data = new TrainTest(load_fashion_mnist());
  }
  static void TearDownTestSuite() {
    delete s_data;
    s_data = nullptr;
  }
  void SetUp() override {
    if (!s_data)
      GTEST_SKIP() << default_fashion_mnist_dir() << " is missing: apt-get install dataset-fashion-mnist";
  }
  static TrainTest* s_data;
};
TrainTest* FashionMnist::s_data = nullptr;

TEST_F(FashionMnist, SizesAndClasses) {
  const Dataset& train = s_data->train;
  const Dataset& test = s_data->test;
  EXPECT_EQ(train.count, 60000);
  EXPECT_EQ(test.count, 10000);
  for (const Dataset* ds : {&train, &test}) {
    EXPECT_EQ(ds->rows, 28);
    EXPECT_EQ(ds->cols, 28);
    EXPECT_EQ(ds->num_classes, 10);
    EXPECT_EQ(ds->images.size(), static_cast<size_t>(ds->count * 28 * 28));
  }
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class.
  std::vector<int> train_per_class(10), test_per_class(10);
  for (int32_t l : train.labels)
    ++train_per_class.at(l);
  for (int32_t l : test.labels)
    ++test_per_class.at(l);
  EXPECT_EQ(train_per_class, std::vector<int>(10, 6000));
  EXPECT_EQ(test_per_class, std::vector<int>(10, 1000));
  // The well-known first samples: ankle boot, T-shirt, T-shirt, dress / ankle boot, pullover, trouser.
  EXPECT_EQ(std::vector<int32_t>(train.labels.begin(), train.labels.begin() + 4), (std::vector<int32_t>{9, 0, 0, 3}));
  EXPECT_EQ(std::vector<int32_t>(test.labels.begin(), test.labels.begin() + 3), (std::vector<int32_t>{9, 2, 1}));
}

TEST_F(FashionMnist, PixelStatisticsMatchTheNormalisationConstants) {
  const Dataset& train = s_data->train;
  double sum = 0, sum_sq = 0;
  for (uint8_t p : train.images) {
    const double x = p / 255.0;
    sum += x;
    sum_sq += x * x;
  }
  const double n = static_cast<double>(train.images.size());
  const double mean = sum / n;
  const double std = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, kFashionMean, 5e-4);
  EXPECT_NEAR(std, kFashionStd, 5e-4);
}

TEST_F(FashionMnist, OneEpochThroughTheLoader) {
  LoaderOptions opt;
  opt.batch_size = 256;
  opt.augment.shift_px = 2;
  opt.augment.hflip = true;
  DataLoader loader(s_data->train, opt);
  loader.start_epoch(0);
  Batch b;
  int64_t seen = 0, batches = 0;
  std::vector<int> per_class(10);
  while (loader.next(b)) {
    EXPECT_EQ(b.images.shape(), (Shape{b.labels.dim(0), 1, 28, 28}));
    for (int64_t i = 0; i < b.labels.dim(0); ++i)
      ++per_class.at(b.labels.data<int32_t>()[i]);
    seen += b.labels.dim(0);
    ++batches;
  }
  EXPECT_EQ(batches, loader.batches_per_epoch());
  EXPECT_EQ(batches, 235);  // ceil(60000 / 256)
  EXPECT_EQ(seen, 60000);
  EXPECT_EQ(per_class, std::vector<int>(10, 6000));
}

}  // namespace
}  // namespace lathe
