// Labelled image sets in memory: an IDX image/label pair (any MNIST-like set) and Fashion-MNIST,
// found where the Debian package dataset-fashion-mnist installs it unless a folder is given.
// Images stay u8 (47 MB for Fashion-MNIST's training set) or f32 (NumPy float32 arrays, intensities
// in [0, 1]), C x H x W per image; the loader normalises each batch, per channel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

/// Fashion-MNIST's per-pixel mean and standard deviation, for inputs scaled to [0, 1] first:
/// x = (p / 255 - kFashionMean) / kFashionStd (the values PyTorch users use).
inline constexpr float kFashionMean = 0.2860f;
inline constexpr float kFashionStd = 0.3530f;
inline constexpr int kFashionClasses = 10;

struct Dataset {
  std::vector<uint8_t> images;        // count * channels * rows * cols (NCHW), one byte per value; or empty
  std::vector<float> float_images;    // the same layout in f32 (intensities, 0 = black, 1 = white); or empty
  std::vector<int32_t> labels;        // count, each in [0, num_classes)
  int64_t count = 0, channels = 1, rows = 0, cols = 0;
  int num_classes = 0;
  std::string source;                    // where the data came from ("<images file> + <labels file>")
  std::vector<std::string> class_names;  // optional, one per class (an image folder's subfolders)
  /// Per-channel mean and std of intensities in [0, 1], used by the loader to normalise
  /// ((p - mean[c]) / std[c]); empty = the loader's options (Fashion-MNIST's values by default).
  std::vector<float> channel_mean, channel_std;

  bool is_float() const { return !float_images.empty(); }
  int64_t pixels_per_image() const { return channels * rows * cols; }
  int64_t plane() const { return rows * cols; }
  const uint8_t* image(int64_t i) const { return images.data() + i * pixels_per_image(); }
  const float* float_image(int64_t i) const { return float_images.data() + i * pixels_per_image(); }
  /// The per-sample input shape a model sees: {channels, rows, cols}.
  std::vector<int64_t> sample_shape() const { return {channels, rows, cols}; }
};

struct TrainTest {
  Dataset train, test;
};

/// Reads an IDX image file (u8, [count, rows, cols]) and its label file (u8, [count]), plain or gzip.
/// `num_classes` > 0 rejects labels >= num_classes; 0 takes num_classes = largest label + 1.
/// `first` > 0 keeps only the first `first` samples and decodes only their images: the result is
/// byte for byte subset(load_idx_pair(...), first) (source suffix included), and every label is
/// still read and checked, so num_classes and the label errors do not depend on `first`; images
/// past them are not decompressed (see read_idx). 0 = every sample.
/// Throws lathe::DataError naming the file for anything read_idx rejects, a count mismatch (both
/// counts named) or a label out of range.
Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int num_classes = 0,
                      int64_t first = 0);

/// Where the Debian package dataset-fashion-mnist puts the files: /usr/share/datasets/fashion-mnist.
std::string default_fashion_mnist_dir();

/// Loads Fashion-MNIST (60000 train and 10000 test images, 28 x 28, 10 classes) from `folder`
/// (empty: default_fashion_mnist_dir()), which holds train-images-idx3-ubyte, train-labels-idx1-ubyte,
/// t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each with or without .gz.
/// `train_first` / `test_first` > 0 keep only that many leading samples of each split (as
/// load_idx_pair's `first`), so a small run decodes only the images it uses; 0 = all.
/// A missing folder or file throws lathe::DataError saying to run `apt-get install
/// dataset-fashion-mnist` or to set `data.path` in the experiment config.
TrainTest load_fashion_mnist(const std::string& folder = "", int64_t train_first = 0, int64_t test_first = 0);

/// Throws lathe::DataError when `ds` holds no samples, naming `split` (e.g. "training set") and the
/// files it came from: a run on 0 images would report a loss or an accuracy that was never measured.
void require_samples(const Dataset& ds, const std::string& split);

/// The first `n` samples of `ds` (all of them when n >= ds.count). Throws lathe::Error when n < 0.
Dataset subset(const Dataset& ds, int64_t n);

/// The samples `indices` of `ds`, in that order, with its shape, classes and normalisation
/// (`source` gets `what` appended). Throws lathe::Error for an index out of range.
Dataset select_samples(const Dataset& ds, const std::vector<int64_t>& indices, const std::string& what);

/// Throws lathe::Error unless the image buffer (u8 or f32, exactly one of them) holds
/// count x channels x rows x cols values and there are count labels.
void check_dataset_shape(const Dataset& ds);

}  // namespace lathe
