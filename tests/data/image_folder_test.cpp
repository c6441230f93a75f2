// Image folders: PNG round trips exact (grey and RGB), JPEG decoded close to what was written, the
// grey conversion and the bilinear resize against values worked out by hand, the folder layout
// (sorted class names, labels, C x H x W order), per-channel statistics, and unreadable files refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/data/channel_stats.h"
#include "engine/data/image_decode.h"
#include "engine/data/image_folder.h"
#include "engine/data/loader.h"
#include "tests/data/data_test_util.h"
#include "tests/support/numpy_writer.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::expect_data_error;
using test::pattern_image;
using test::TempDir;

TEST(ImageDecode, PngRoundTripsExactlyInGreyAndRgb) {
  TempDir dir;
  for (int64_t c : {1, 3}) {
    const DecodedImage img = pattern_image(5, 7, c, static_cast<int>(c));
    write_png(dir.file("a.png"), img);
    const DecodedImage back = decode_image_file(dir.file("a.png"));
    EXPECT_EQ(back.width, 7);
    EXPECT_EQ(back.height, 5);
    EXPECT_EQ(back.channels, c);
    EXPECT_EQ(back.pixels, img.pixels);
  }
}

TEST(ImageDecode, JpegDecodesCloseToWhatWasWritten) {
  TempDir dir;
  DecodedImage img{16, 16, 3, {}};
  for (int64_t y = 0; y < 16; ++y)
    for (int64_t x = 0; x < 16; ++x)
      for (int64_t k = 0; k < 3; ++k)
        img.pixels.push_back(static_cast<uint8_t>(20 + 8 * x + 4 * y + 20 * k));  // smooth, <= 240: JPEG keeps it well
  write_jpeg(dir.file("a.jpg"), img, 100);
  const DecodedImage back = decode_image_file(dir.file("a.jpg"));
  ASSERT_EQ(back.channels, 3);
  ASSERT_EQ(back.pixels.size(), img.pixels.size());
  for (size_t i = 0; i < img.pixels.size(); ++i)
    EXPECT_NEAR(back.pixels[i], img.pixels[i], 4) << i;
}

TEST(ImageDecode, GreyConversionAndBilinearResizeMatchHandValues) {
  const DecodedImage rgb{2, 1, 3, {255, 0, 0, 10, 20, 30}};
  // 0.299 * 255 = 76.245 -> 76; 0.299*10 + 0.587*20 + 0.114*30 = 18.15 -> 18
  EXPECT_EQ(convert_channels(rgb, 1).pixels, (std::vector<uint8_t>{76, 18}));
  EXPECT_EQ(convert_channels(DecodedImage{1, 1, 1, {9}}, 3).pixels, (std::vector<uint8_t>{9, 9, 9}));
  // Width 2 -> 4, half-pixel centres: sources -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1).
  const DecodedImage row{2, 1, 1, {0, 100}};
  EXPECT_EQ(resize_bilinear(row, 1, 4).pixels, (std::vector<uint8_t>{0, 25, 75, 100}));
  // 4 -> 2: sources 0.5 and 2.5, the means of the pairs.
  const DecodedImage four{4, 1, 1, {0, 10, 20, 40}};
  EXPECT_EQ(resize_bilinear(four, 1, 2).pixels, (std::vector<uint8_t>{5, 30}));
  // Both axes at once: a 2x2 to 3x3 (scale 2/3: sources 0, 0.5, 1 clamped -> corners and means).
  const DecodedImage sq{2, 2, 1, {0, 60, 120, 180}};
  EXPECT_EQ(resize_bilinear(sq, 3, 3).pixels, (std::vector<uint8_t>{0, 30, 60, 60, 90, 120, 120, 150, 180}));
}

TEST(ImageFolder, ReadsSortedClassesIntoChwU8) {
  TempDir dir;
  const fs::path root = dir.path();
  for (const char* split : {"train", "test"})
    for (const char* cls : {"zebra", "ant"})
      fs::create_directories(root / split / cls);
  const DecodedImage a0 = pattern_image(4, 4, 3, 1), a1 = pattern_image(4, 4, 3, 2), z0 = pattern_image(4, 4, 3, 3);
  write_png((root / "train/ant/b.png").string(), a1);
  write_png((root / "train/ant/a.png").string(), a0);
  write_png((root / "train/zebra/x.PNG").string(), z0);
  write_png((root / "test/zebra/t.png").string(), a0);
  const TrainTest tt = load_image_folder(root.string(), 4, 3);
  EXPECT_EQ(tt.train.class_names, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(tt.train.labels, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(tt.test.labels, (std::vector<int32_t>{1}));
  EXPECT_EQ(tt.train.num_classes, 2);
  EXPECT_EQ(tt.test.num_classes, 2);
  ASSERT_EQ(tt.train.count, 3);
  // Image 0 is a.png, channel-planar: value (c, y, x) = pixel (y, x) channel c.
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t p = 0; p < 16; ++p)
      ASSERT_EQ(tt.train.image(0)[c * 16 + p], a0.pixels[static_cast<size_t>(p * 3 + c)]);
  // Grey and resized.
  const TrainTest grey = load_image_folder(root.string(), 2, 1);
  EXPECT_EQ(grey.train.channels, 1);
  EXPECT_EQ(grey.train.rows, 2);
  EXPECT_EQ(grey.train.pixels_per_image(), 4);
}

TEST(ImageFolder, RefusesUnreadableFilesAndBadLayoutsNamingThem) {
  TempDir dir;
  const fs::path root = dir.path();
  fs::create_directories(root / "train/a");
  fs::create_directories(root / "test/a");
  expect_data_error([&] { load_image_folder(root.string(), 4, 1); }, {"holds no images"});
  write_png((root / "train/a/ok.png").string(), pattern_image(4, 4, 1, 0));
  // A PNG cut short.
  std::vector<uint8_t> bytes = test::read_bytes((root / "train/a/ok.png").string());
  bytes.resize(bytes.size() / 2);
  test::write_file_bytes((root / "train/a/cut.png").string(), bytes);
  expect_data_error([&] { load_image_folder(root.string(), 4, 1); }, {"cut.png", "corrupt PNG"});
  fs::remove(root / "train/a/cut.png");
  test::write_file_bytes((root / "train/a/fake.jpg").string(), {'h', 'e', 'l', 'l', 'o'});
  expect_data_error([&] { load_image_folder(root.string(), 4, 1); }, {"fake.jpg", "neither a PNG nor a JPEG"});
  fs::remove(root / "train/a/fake.jpg");
  test::write_file_bytes((root / "train/a/notes.txt").string(), {'x'});
  expect_data_error([&] { load_image_folder(root.string(), 4, 1); }, {"notes.txt", "allowed: .png, .jpg, .jpeg"});
  fs::remove(root / "train/a/notes.txt");
  fs::create_directories(root / "test/b");
  expect_data_error([&] { load_image_folder(root.string(), 4, 1); }, {"class 'b'"});
  fs::remove(root / "test/b");
  EXPECT_EQ(load_image_folder(root.string(), 4, 1).train.count, 1);
  expect_data_error([&] { load_image_folder((root / "nowhere").string(), 4, 1); }, {"nowhere", "train/"});
}

TEST(ChannelStats, AreThePerChannelMeanAndStdOfIntensities) {
  Dataset ds;
  ds.count = 2;
  ds.channels = 2;
  ds.rows = 1;
  ds.cols = 2;
  // channel 0: 0, 255, 255, 255 -> mean 0.75, std sqrt(0.1875); channel 1 constant 51 -> 0.2, std 1
  ds.images = {0, 255, 51, 51, 255, 255, 51, 51};
  ds.labels = {0, 1};
  const ChannelStats st = compute_channel_stats(ds);
  ASSERT_EQ(st.mean.size(), 2u);
  EXPECT_FLOAT_EQ(st.mean[0], 0.75f);
  EXPECT_FLOAT_EQ(st.std[0], static_cast<float>(std::sqrt(0.1875)));
  EXPECT_FLOAT_EQ(st.mean[1], 0.2f);
  EXPECT_FLOAT_EQ(st.std[1], 1.0f);

  // The loader normalises each channel with its own statistics.
  set_normalisation(ds, st);
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  DataLoader loader(ds, o);
  loader.start_epoch(0);
  Batch b;
  ASSERT_TRUE(loader.next(b));
  ASSERT_EQ(b.images.shape(), (Shape{2, 2, 1, 2}));
  const float* v = b.images.data<float>();
  EXPECT_FLOAT_EQ(v[1], (1.0f - 0.75f) / st.std[0]);
  EXPECT_FLOAT_EQ(v[0], (0.0f - 0.75f) / st.std[0]);
  EXPECT_NEAR(v[2], 0.0f, 1e-6);  // 51 / 255 = 0.2 = the mean
}

TEST(ChannelAugment, ShiftsEveryChannelTheSameWayWithItsOwnBlack) {
  const std::vector<PixelSpace> spaces = {{0.5f, 0.5f}, {0.0f, 0.25f}};
  // 2 channels of 1 x 3: [1, 2, 3] and [4, 5, 6].
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};
  std::vector<float> dst(6);
  AugmentOptions o;
  o.shift_px = 1;
  // Find a seed whose plan shifts right by one without a flip, then check both channels moved.
  for (uint64_t seed = 0; seed < 64; ++seed) {
    Rng probe(seed);
    const AugmentPlan plan = draw_augment(o, probe);
    if (plan.dx != 1 || plan.dy != 0)
      continue;
    Rng rng(seed);
    augment_channels(src.data(), dst.data(), 2, 1, 3, o, rng, spaces);
    EXPECT_EQ(dst, (std::vector<float>{spaces[0].black(), 1, 2, spaces[1].black(), 4, 5}));
    return;
  }
  FAIL() << "no seed gave a shift of (1, 0)";
}

}  // namespace
}  // namespace lathe
