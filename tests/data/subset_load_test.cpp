// Loading only a subset: load_idx_pair / load_fashion_mnist / load_image_folder with a sample limit,
// and load_run_data with data.train_subset / test_subset, give byte for byte the Dataset that the
// full load followed by subset() gave (images, labels, classes, normalisation, source), for limits
// of 0, 1, odd sizes, exactly the count and past it, on both splits; what is still checked past the
// subset (labels, file names, plain-file sizes) and what no longer is (a gzip tail, undecoded images).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/data/array_dataset.h"
#include "engine/data/channel_stats.h"
#include "engine/data/dataset.h"
#include "engine/data/idx_reader.h"
#include "engine/data/image_decode.h"
#include "engine/data/image_folder.h"
#include "engine/data/npz_reader.h"
#include "engine/run/data_setup.h"
#include "tests/data/data_test_util.h"
#include "tests/support/numpy_writer.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using test::expect_data_error;
using test::TempDir;

/// What load_run_data did before loading subsets directly: the whole split, then its first n.
Dataset full_then_subset(const Dataset& full, int64_t n) { return n > 0 && n < full.count ? subset(full, n) : full; }

void expect_same_dataset(const Dataset& got, const Dataset& want, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.channels, want.channels);
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.cols, want.cols);
  EXPECT_EQ(got.num_classes, want.num_classes);
  EXPECT_EQ(got.source, want.source);
  EXPECT_EQ(got.class_names, want.class_names);
  EXPECT_EQ(got.channel_mean, want.channel_mean);  // float ==: the same bits, not merely close
  EXPECT_EQ(got.channel_std, want.channel_std);
  EXPECT_EQ(got.labels, want.labels);
  EXPECT_TRUE(got.images == want.images) << "u8 images differ (" << got.images.size() << " vs " << want.images.size()
                                         << " bytes)";
  EXPECT_TRUE(got.float_images == want.float_images);
}

/// `count` images of rows x cols, pixels from a seeded LCG (every byte value occurs), labels given.
void write_subset_pair(const std::string& images, const std::string& labels, uint32_t count, uint32_t rows,
                       uint32_t cols, const std::vector<uint8_t>& label_values, bool gzip) {
  std::vector<uint8_t> pixels(size_t{count} * rows * cols);
  uint32_t s = 12345;
  for (uint8_t& p : pixels) {
    s = s * 1664525u + 1013904223u;
    p = static_cast<uint8_t>(s >> 24);
  }
  test::write_bytes(images, test::idx_bytes({count, rows, cols}, pixels), gzip);
  test::write_bytes(labels, test::idx_bytes({static_cast<uint32_t>(label_values.size())}, label_values), gzip);
}

std::vector<uint8_t> cycling_labels(uint32_t count, uint32_t classes) {
  std::vector<uint8_t> v(count);
  for (uint32_t i = 0; i < count; ++i)
    v[i] = static_cast<uint8_t>((i * 7 + 3) % classes);
  return v;
}

TEST(SubsetLoad, IdxPairFirstNIsTheFullLoadThenSubset) {
  TempDir dir;
  for (const bool gzip : {false, true}) {
    const std::string img = dir.file(gzip ? "i.gz" : "i"), lab = dir.file(gzip ? "l.gz" : "l");
    std::vector<uint8_t> labels = cycling_labels(37, 6);
    labels[33] = 8;  // the largest label lies past most subsets: num_classes is still 9
    write_subset_pair(img, lab, 37, 5, 3, labels, gzip);
    for (const int nc : {0, 10}) {
      const Dataset full = load_idx_pair(img, lab, nc);
      ASSERT_EQ(full.count, 37);
      EXPECT_EQ(full.num_classes, nc ? 10 : 9);
      for (const int64_t n : {0, 1, 2, 17, 36, 37, 38, 1000})
        expect_same_dataset(load_idx_pair(img, lab, nc, n), full_then_subset(full, n),
                            (gzip ? "gzip n=" : "plain n=") + std::to_string(n) + " classes=" + std::to_string(nc));
    }
  }
}

TEST(SubsetLoad, LabelsPastTheSubsetAreStillCheckedAndCounted) {
  TempDir dir;
  std::vector<uint8_t> labels = cycling_labels(20, 4);
  labels[15] = 12;
  write_subset_pair(dir.file("i"), dir.file("l"), 20, 2, 2, labels, false);
  expect_data_error([&] { load_idx_pair(dir.file("i"), dir.file("l"), 10, 3); },
                    {dir.file("l"), "label 12", "index 15", "[0, 10)"});
  write_subset_pair(dir.file("i6"), dir.file("l5"), 6, 2, 2, {1, 2, 3, 4, 5}, false);
  expect_data_error([&] { load_idx_pair(dir.file("i6"), dir.file("l5"), 0, 2); },
                    {"count mismatch", "6 images", "5 labels"});
}

TEST(SubsetLoad, ReadIdxFirstRecordsChecksHeaderAndPlainSizeButNotAGzipTail) {
  TempDir dir;
  const std::vector<uint8_t> data = test::ramp(4 * 3 * 2);
  const std::vector<uint8_t> file = test::idx_bytes({4, 3, 2}, data);
  test::write_bytes(dir.file("a"), file, false);
  const IdxArray head = read_idx(dir.file("a"), 3, 0);
  EXPECT_EQ(head.dims, (std::vector<int64_t>{0, 3, 2}));
  EXPECT_EQ(head.header_records, 4);
  EXPECT_TRUE(head.data.empty());
  const IdxArray two = read_idx(dir.file("a"), 3, 2);
  EXPECT_EQ(two.dims, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(two.data, std::vector<uint8_t>(data.begin(), data.begin() + 12));
  EXPECT_EQ(read_idx(dir.file("a"), 3, 9).data, data);
  EXPECT_EQ(read_idx(dir.file("a"), 3, 9).dims[0], 4);
  // A plain file cut short or with trailing bytes is refused from its size, whatever is read of it.
  std::vector<uint8_t> cut(file.begin(), file.end() - 1);
  test::write_bytes(dir.file("cut"), cut, false);
  expect_data_error([&] { read_idx(dir.file("cut"), 3, 1); }, {"truncated"});
  std::vector<uint8_t> longer = file;
  longer.push_back(0);
  test::write_bytes(dir.file("long"), longer, false);
  expect_data_error([&] { read_idx(dir.file("long"), 3, 1); }, {"1 unexpected bytes"});
  // A gzip stream whose tail is missing: the full read refuses it; the first records, all there, read.
  test::write_bytes(dir.file("t.gz"), std::vector<uint8_t>(file.begin(), file.end() - 6), true);
  expect_data_error([&] { read_idx(dir.file("t.gz"), 3); }, {"truncated"});
  EXPECT_EQ(read_idx(dir.file("t.gz"), 3, 2).data, two.data);
  expect_data_error([&] { read_idx(dir.file("t.gz"), 3, 4); }, {"truncated"});
}

TEST(SubsetLoad, IdxRunDataEqualsTheFullLoadThenSubset) {
  TempDir dir;
  std::vector<uint8_t> train_labels = cycling_labels(29, 5);
  train_labels[28] = 11;  // inferred classes (12) come from the last training label
  write_subset_pair(dir.file("tri.gz"), dir.file("trl.gz"), 29, 4, 6, train_labels, true);
  write_subset_pair(dir.file("tei"), dir.file("tel"), 13, 4, 6, cycling_labels(13, 12), false);
  DataConfig d;
  d.dataset = DatasetKind::idx;
  d.train_images = dir.file("tri.gz");
  d.train_labels = dir.file("trl.gz");
  d.test_images = dir.file("tei");
  d.test_labels = dir.file("tel");
  const Dataset train = load_idx_pair(d.train_images, d.train_labels);
  const Dataset test = load_idx_pair(d.test_images, d.test_labels, train.num_classes);
  const std::pair<int64_t, int64_t> cuts[] = {{0, 0}, {1, 1}, {7, 5}, {28, 12}, {29, 13}, {30, 500}};
  for (const auto& cut : cuts) {
    d.train_subset = cut.first;
    d.test_subset = cut.second;
    const TrainTest tt = load_run_data(d);
    const std::string what = "subsets " + std::to_string(cut.first) + "/" + std::to_string(cut.second);
    expect_same_dataset(tt.train, full_then_subset(train, cut.first), "train " + what);
    expect_same_dataset(tt.test, full_then_subset(test, cut.second), "test " + what);
    EXPECT_EQ(tt.train.num_classes, 12);
  }
}

// The real data set, when installed: every subset the runs use gives the bytes it gave before.
TEST(SubsetLoad, FashionMnistRunDataEqualsTheFullLoadThenSubset) {
  if (!fs::is_directory(default_fashion_mnist_dir()))
    GTEST_SKIP() << default_fashion_mnist_dir() << " is missing: apt-get install dataset-fashion-mnist";
  const TrainTest full = load_fashion_mnist();
  DataConfig d;
  const std::pair<int64_t, int64_t> cuts[] = {{0, 0},       {1, 1},         {2000, 500},
                                              {1999, 9999}, {60000, 10000}, {60001, 10001}};
  for (const auto& cut : cuts) {
    d.train_subset = cut.first;
    d.test_subset = cut.second;
    const TrainTest tt = load_run_data(d);
    const std::string what = "subsets " + std::to_string(cut.first) + "/" + std::to_string(cut.second);
    expect_same_dataset(tt.train, full_then_subset(full.train, cut.first), "train " + what);
    expect_same_dataset(tt.test, full_then_subset(full.test, cut.second), "test " + what);
    TrainTest reference;
    reference.train = full_then_subset(full.train, cut.first);
    reference.test = full_then_subset(full.test, cut.second);
    EXPECT_EQ(data_record(d, tt), data_record(d, reference)) << what;
  }
}

/// `n` seeded bytes (every value occurs for large n).
std::vector<uint8_t> lcg_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

/// Little-endian bytes of `v` (the machine's order: the tests run on x86 and arm64).
template <class T>
std::vector<uint8_t> raw_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(SubsetLoad, NumpyRunDataEqualsTheFullLoadThenSubset) {
  TempDir dir;
  // 23 RGB 3x5 float32 training images (deflated member), 11 test images (stored member), labels
  // int64 and uint8; the last training label alone makes 9 classes. The .npy folder holds uint8 images.
  std::vector<int64_t> train_labels(23);
  for (size_t i = 0; i < train_labels.size(); ++i)
    train_labels[i] = static_cast<int64_t>(i % 4);
  train_labels[22] = 8;
  std::vector<float> test_pixels(11 * 3 * 3 * 5);
  for (size_t i = 0; i < test_pixels.size(); ++i)
    test_pixels[i] = static_cast<float>(i % 17) / 16.0f;
  const std::vector<uint8_t> train_bytes = lcg_bytes(23 * 45, 7);
  std::vector<float> train_pixels(train_bytes.size());
  for (size_t i = 0; i < train_pixels.size(); ++i)
    train_pixels[i] = static_cast<float>(train_bytes[i]) / 255.0f;
  const std::vector<uint8_t> x_train = npy_bytes(NpyDtype::f32, {23, 3, 3, 5}, raw_bytes(train_pixels));
  const std::vector<uint8_t> y_train = npy_bytes(NpyDtype::s64, {23}, raw_bytes(train_labels));
  const std::vector<uint8_t> x_test = npy_bytes(NpyDtype::f32, {11, 3, 3, 5}, raw_bytes(test_pixels));
  const std::vector<uint8_t> y_test = npy_bytes(NpyDtype::u8, {11}, cycling_labels(11, 9));
  test::write_file_bytes(dir.file("d.npz"), test::zip_bytes({{"x_train.npy", x_train, true},
                                                             {"y_train.npy", y_train, true},
                                                             {"x_test.npy", x_test, false},
                                                             {"y_test.npy", y_test, false}}));
  fs::create_directories(dir.file("npy"));
  test::write_file_bytes(dir.file("npy/x_train.npy"), npy_bytes(NpyDtype::u8, {23, 3, 3, 5}, train_bytes));
  test::write_file_bytes(dir.file("npy/y_train.npy"), y_train);
  test::write_file_bytes(dir.file("npy/x_test.npy"), npy_bytes(NpyDtype::u8, {11, 3, 3, 5}, lcg_bytes(11 * 45, 9)));
  test::write_file_bytes(dir.file("npy/y_test.npy"), y_test);
  for (const std::string path : {dir.file("d.npz"), dir.file("npy")}) {
    const TrainTest full = load_numpy_dataset(path);
    ASSERT_EQ(full.train.count, 23);
    DataConfig d;
    d.dataset = DatasetKind::npz;
    d.path = path;
    const std::pair<int64_t, int64_t> cuts[] = {{0, 0}, {1, 1}, {6, 4}, {22, 10}, {23, 11}, {24, 500}};
    for (const auto& cut : cuts) {
      const std::string what = path + " subsets " + std::to_string(cut.first) + "/" + std::to_string(cut.second);
      const TrainTest direct = load_numpy_dataset(path, 0, cut.first, cut.second);
      expect_same_dataset(direct.train, full_then_subset(full.train, cut.first), "train " + what);
      expect_same_dataset(direct.test, full_then_subset(full.test, cut.second), "test " + what);
      EXPECT_EQ(direct.train.num_classes, 9) << what;  // from every label, not the first ones
      d.train_subset = cut.first;
      d.test_subset = cut.second;
      const TrainTest tt = load_run_data(d);  // normalised by the kept training images' statistics
      TrainTest want;
      want.train = full_then_subset(full.train, cut.first);
      want.test = full_then_subset(full.test, cut.second);
      const ChannelStats stats = compute_channel_stats(want.train);
      set_normalisation(want.train, stats);
      set_normalisation(want.test, stats);
      expect_same_dataset(tt.train, want.train, "run train " + what);
      expect_same_dataset(tt.test, want.test, "run test " + what);
    }
  }
}

TEST(SubsetLoad, NumpyReadsStopAtTheSubsetButLabelsAreStillChecked) {
  TempDir dir;
  std::vector<float> pixels(6 * 2 * 2, 0.5f);
  pixels.back() = NAN;  // in the last image only
  const std::vector<uint8_t> x = npy_bytes(NpyDtype::f32, {6, 2, 2}, raw_bytes(pixels));
  const std::vector<uint8_t> y = npy_bytes(NpyDtype::u8, {6}, {0, 1, 0, 1, 0, 1});
  // x_train deflated with a wrong CRC: only a read of the whole member can notice it.
  test::write_file_bytes(dir.file("crc.npz"), test::zip_bytes({{"x_train.npy", x, true, -1, true},
                                                               {"y_train.npy", y, false},
                                                               {"x_test.npy", x, false},
                                                               {"y_test.npy", y, false}}));
  expect_data_error([&] { load_numpy_dataset(dir.file("crc.npz")); }, {"crc.npz:x_train.npy"});
  const TrainTest tt = load_numpy_dataset(dir.file("crc.npz"), 0, 5, 5);
  EXPECT_EQ(tt.train.count, 5);
  EXPECT_EQ(tt.test.count, 5);
  EXPECT_EQ(tt.train.source, dir.file("crc.npz") + ":x_train + " + dir.file("crc.npz") + ":y_train (first 5)");
  // The NaN in image 5 is refused once image 5 is read, by either split.
  expect_data_error([&] { load_numpy_dataset(dir.file("crc.npz"), 0, 5, 6); }, {"x_test", "finite"});
  // A label past the subset is read and checked, and counts toward the classes.
  const std::vector<uint8_t> x_ok = npy_bytes(NpyDtype::u8, {6, 2, 2}, lcg_bytes(24, 3));
  test::write_file_bytes(
      dir.file("labels.npz"),
      test::zip_bytes(
          {{"x_train.npy", x_ok, true},
           {"y_train.npy", npy_bytes(NpyDtype::s64, {6}, raw_bytes(std::vector<int64_t>{0, 1, 0, 1, 0, -3})), false},
           {"x_test.npy", x_ok, false},
           {"y_test.npy", y, false}}));
  expect_data_error([&] { load_numpy_dataset(dir.file("labels.npz"), 0, 2, 2); }, {"label -3 at index 5"});
  // Fewer labels than images in the file is a mismatch even when the subset would fit both.
  test::write_file_bytes(dir.file("count.npz"),
                         test::zip_bytes({{"x_train.npy", x_ok, false},
                                          {"y_train.npy", npy_bytes(NpyDtype::u8, {5}, {0, 1, 0, 1, 0}), false},
                                          {"x_test.npy", x_ok, false},
                                          {"y_test.npy", y, false}}));
  expect_data_error([&] { load_numpy_dataset(dir.file("count.npz"), 0, 2, 2); }, {"holds 6 images", "5 labels"});
  // read_npy / NpzArchive::read with a record limit: the header's shape cut, the file's count kept.
  test::write_file_bytes(dir.file("x.npy"), x_ok);
  const NpyArray part = read_npy(dir.file("x.npy"), 4);
  EXPECT_EQ(part.header.shape, (std::vector<int64_t>{4, 2, 2}));
  EXPECT_EQ(part.file_records, 6);
  EXPECT_EQ(part.data, std::vector<uint8_t>(x_ok.end() - 24, x_ok.end() - 8));
  const NpyArray none = NpzArchive(dir.file("labels.npz")).read("x_train", 0);
  EXPECT_EQ(none.header.count(), 0);
  EXPECT_EQ(none.file_records, 6);
}

TEST(SubsetLoad, ImageFolderFirstNIsTheFullLoadThenSubsetWithItsStatistics) {
  TempDir dir;
  const fs::path root = dir.path();
  int seed = 0;
  for (const char* split : {"train", "test"})
    for (const char* cls : {"cat", "ant", "bee"}) {
      fs::create_directories(root / split / cls);
      const int files = std::string(split) == "test" ? 1 : std::string(cls) == "cat" ? 3 : 2;
      for (int f = 0; f < files; ++f, ++seed)
        write_png((root / split / cls / ("f" + std::to_string(f) + ".png")).string(),
                  test::pattern_image(5, 5, 3, seed));
    }
  DataConfig d;
  d.dataset = DatasetKind::folder;
  d.path = root.string();
  d.image_size = 4;  // resized: the bilinear path too
  d.channels = 3;
  const TrainTest full = load_image_folder(d.path, d.image_size, d.channels);
  ASSERT_EQ(full.train.count, 7);
  ASSERT_EQ(full.test.count, 3);
  const std::pair<int64_t, int64_t> cuts[] = {{0, 0}, {1, 1}, {3, 2}, {6, 3}, {7, 4}, {100, 100}};
  for (const auto& cut : cuts) {
    const std::string what = "subsets " + std::to_string(cut.first) + "/" + std::to_string(cut.second);
    const TrainTest direct = load_image_folder(d.path, d.image_size, d.channels, cut.first, cut.second);
    expect_same_dataset(direct.train, full_then_subset(full.train, cut.first), "folder train " + what);
    expect_same_dataset(direct.test, full_then_subset(full.test, cut.second), "folder test " + what);
    // load_run_data: the statistics come from the same training images as before.
    d.train_subset = cut.first;
    d.test_subset = cut.second;
    const TrainTest tt = load_run_data(d);
    TrainTest want;
    want.train = full_then_subset(full.train, cut.first);
    want.test = full_then_subset(full.test, cut.second);
    const ChannelStats stats = compute_channel_stats(want.train);
    set_normalisation(want.train, stats);
    set_normalisation(want.test, stats);
    ASSERT_EQ(tt.train.channel_mean.size(), 3u);
    expect_same_dataset(tt.train, want.train, "run train " + what);
    expect_same_dataset(tt.test, want.test, "run test " + what);
  }
  // Past the subset a corrupt image is not opened, but a file that is no image is still refused.
  test::write_file_bytes((root / "train/cat/z.png").string(), {'n', 'o', 'p', 'e'});
  EXPECT_EQ(load_image_folder(d.path, d.image_size, d.channels, 2, 1).train.count, 2);
  expect_data_error([&] { load_image_folder(d.path, d.image_size, d.channels); }, {"z.png"});
  test::write_file_bytes((root / "train/cat/readme.txt").string(), {'x'});
  expect_data_error([&] { load_image_folder(d.path, d.image_size, d.channels, 2, 1); },
                    {"readme.txt", "allowed: .png, .jpg, .jpeg"});
}

}  // namespace
}  // namespace lathe
