// Builds Datasets from NumPy arrays (.npz archives or .npy folders), checking ranks, dtypes and labels.
#include "engine/data/array_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/data/npz_reader.h"

namespace lathe {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "(" + s + ")";
}

}  // namespace

Dataset dataset_from_arrays(const NpyArray& images, const std::string& images_name, const NpyArray& labels,
                            const std::string& labels_name, int num_classes) {
  const std::vector<int64_t>& xs = images.header.shape;
  const std::vector<int64_t>& ys = labels.header.shape;
  if (xs.size() != 3 && xs.size() != 4)
    throw DataError("NumPy array '" + images_name + "': images of shape " + shape_text(xs) +
                    "; expected N,H,W (one channel) or N,C,H,W");
  Dataset ds;
  ds.count = xs[0];
  ds.channels = xs.size() == 4 ? xs[1] : 1;
  ds.rows = xs[xs.size() - 2];
  ds.cols = xs[xs.size() - 1];
  ds.source = images_name + " + " + labels_name;
  if (ds.channels < 1 || ds.rows < 1 || ds.cols < 1)
    throw DataError("NumPy array '" + images_name + "': images of shape " + shape_text(xs) +
                    "; channels, rows and cols must be at least 1");
  int64_t image_elements = 0;  // bounded by the file when N > 0, not when the array is empty (N = 0)
  if (__builtin_mul_overflow(ds.channels, ds.rows, &image_elements) ||
      __builtin_mul_overflow(image_elements, ds.cols, &image_elements) || image_elements > (int64_t{1} << 40))
    throw DataError("NumPy array '" + images_name + "': images of shape " + shape_text(xs) +
                    "; an image of more than 2^40 values is not a plausible image");
  if (xs.size() == 4 && ds.channels > 4 && ds.cols <= 4)
    throw DataError("NumPy array '" + images_name + "': shape " + shape_text(xs) +
                    " looks channels-last (N,H,W,C); Lathe reads N,C,H,W: save np.transpose(x, (0, 3, 1, 2))");
  const NpyDtype t = images.header.dtype;
  if (t != NpyDtype::u8 && t != NpyDtype::f32)
    throw DataError("NumPy array '" + images_name + "': images of dtype " + npy_dtype_name(t) +
                    "; allowed: uint8 (0..255) or float32 (intensities in [0, 1])");
  if (ys.size() != 1)
    throw DataError("NumPy array '" + labels_name + "': labels of shape " + shape_text(ys) + "; expected N (1-D)");
  if (!labels.is_integer())
    throw DataError("NumPy array '" + labels_name + "': labels of dtype " + npy_dtype_name(labels.header.dtype) +
                    "; allowed: an integer type (int64, int32, uint8, ...)");
  // Images may have been read in part (the first records: a data subset); the labels are whole, so the
  // count check, the range check and an inferred class count are what a full load gives.
  const int64_t total = std::max(images.file_records, ds.count);
  if (ys[0] != total)
    throw DataError("image/label count mismatch: '" + images_name + "' holds " + std::to_string(total) +
                    " images but '" + labels_name + "' holds " + std::to_string(ys[0]) + " labels");

  ds.labels.resize(static_cast<size_t>(ds.count));
  int64_t max_label = -1;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t label = labels.as_int(i);
    if (label < 0 || label > (1 << 30) || (num_classes > 0 && label >= num_classes))
      throw DataError("NumPy array '" + labels_name + "': label " + std::to_string(label) + " at index " +
                      std::to_string(i) + " is out of range; labels must be in [0, " +
                      (num_classes > 0 ? std::to_string(num_classes) : std::string("2^30")) + ")");
    if (i < ds.count)
      ds.labels[static_cast<size_t>(i)] = static_cast<int32_t>(label);
    max_label = std::max(max_label, label);
  }
  ds.num_classes = num_classes > 0 ? num_classes : static_cast<int>(max_label + 1);
  if (ds.count < total)  // as subset() names the samples it keeps
    ds.source += " (first " + std::to_string(ds.count) + ")";

  if (t == NpyDtype::u8) {
    ds.images = images.data;
  } else {
    ds.float_images.resize(static_cast<size_t>(images.header.count()));
    std::memcpy(ds.float_images.data(), images.data.data(), images.data.size());
    for (size_t i = 0; i < ds.float_images.size(); ++i)
      if (!std::isfinite(ds.float_images[i]))
        throw DataError("NumPy array '" + images_name + "': element " + std::to_string(i) + " is " +
                        std::to_string(ds.float_images[i]) + "; float images must be finite");
  }
  return ds;
}

TrainTest load_numpy_dataset(const std::string& path, int num_classes, int64_t train_first, int64_t test_first) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const char* const keys[] = {"x_train", "y_train", "x_test", "y_test"};
  NpyArray arrays[4];
  std::string names[4];
  // Images: only the first train_first / test_first records (0: all); labels: always whole.
  const int64_t first[4] = {train_first > 0 ? train_first : -1, -1, test_first > 0 ? test_first : -1, -1};
  if (fs::is_directory(path, ec)) {
    for (int i = 0; i < 4; ++i) {
      names[i] = (fs::path(path) / (std::string(keys[i]) + ".npy")).string();
      if (!fs::is_regular_file(names[i], ec))
        throw DataError("data.path: the folder '" + path + "' has no " + keys[i] +
                        ".npy; a NumPy folder holds x_train.npy, y_train.npy, x_test.npy and y_test.npy");
      arrays[i] = read_npy(names[i], first[i]);
    }
  } else if (fs::is_regular_file(path, ec)) {
    const NpzArchive npz(path);
    for (int i = 0; i < 4; ++i) {
      names[i] = path + ":" + keys[i];
      arrays[i] = npz.read(keys[i], first[i]);
    }
  } else {
    throw DataError("data.path: '" + path + "' does not exist; dataset \"npz\" needs a .npz file holding x_train, "
                    "y_train, x_test and y_test (np.savez), or a folder of those four .npy files");
  }
  TrainTest tt;
  tt.train = dataset_from_arrays(arrays[0], names[0], arrays[1], names[1], num_classes);
  tt.test = dataset_from_arrays(arrays[2], names[2], arrays[3], names[3], tt.train.num_classes);
  if (tt.test.channels != tt.train.channels || tt.test.rows != tt.train.rows || tt.test.cols != tt.train.cols ||
      tt.test.is_float() != tt.train.is_float())
    throw DataError("NumPy data '" + path + "': test images are " + std::to_string(tt.test.channels) + "x" +
                    std::to_string(tt.test.rows) + "x" + std::to_string(tt.test.cols) +
                    (tt.test.is_float() ? " float32" : " uint8") + " but training images " +
                    std::to_string(tt.train.channels) + "x" + std::to_string(tt.train.rows) + "x" +
                    std::to_string(tt.train.cols) + (tt.train.is_float() ? " float32" : " uint8") +
                    "; both splits must have the same shape and dtype");
  return tt;
}

}  // namespace lathe
