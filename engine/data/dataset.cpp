// Builds Datasets from IDX files and locates Fashion-MNIST on disk.
#include "engine/data/dataset.h"

#include <algorithm>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/data/idx_reader.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;

const char* const kFashionFiles[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                     "t10k-labels-idx1-ubyte"};

std::string fashion_hint() {
  return "install the data with `apt-get install dataset-fashion-mnist` (it goes to " + default_fashion_mnist_dir() +
         "), or set `data.path` in the experiment config to a folder holding " +
         "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte " +
         "(each may be .gz)";
}

/// folder/name, or folder/name.gz; throws DataError with the install hint when neither exists.
std::string find_fashion_file(const std::string& folder, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    const fs::path p = fs::path(folder) / candidate;
    if (fs::is_regular_file(p, ec))
      return p.string();
  }
  throw DataError("Fashion-MNIST: the folder '" + folder + "' has no " + name + " or " + name + ".gz; " +
                  fashion_hint());
}

}  // namespace

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int num_classes, int64_t first) {
  LATHE_CHECK(first >= 0, "load_idx_pair: first must be >= 0, got ", first);
  // Only the images kept are read; the labels (one byte each) are all read, so that the count
  // check, the range check and an inferred num_classes are what a full load gives.
  IdxArray images = read_idx(images_path, 3, first > 0 ? first : -1);
  IdxArray labels = read_idx(labels_path, 1);

  Dataset ds;
  const int64_t total = images.header_records;
  ds.count = images.dims[0];
  ds.rows = images.dims[1];
  ds.cols = images.dims[2];
  ds.source = images_path + " + " + labels_path;
  if (ds.rows < 1 || ds.cols < 1)
    throw DataError("IDX file '" + images_path + "': images of " + std::to_string(ds.rows) + " x " +
                    std::to_string(ds.cols) + " pixels; rows and cols must be at least 1");
  if (labels.dims[0] != total)
    throw DataError("image/label count mismatch: images file '" + images_path + "' holds " + std::to_string(total) +
                    " images but labels file '" + labels_path + "' holds " + std::to_string(labels.dims[0]) +
                    " labels");

  ds.labels.resize(static_cast<size_t>(ds.count));
  int max_label = -1;
  for (int64_t i = 0; i < total; ++i) {
    const int label = labels.data[i];
    if (num_classes > 0 && label >= num_classes)
      throw DataError("IDX file '" + labels_path + "': label " + std::to_string(label) + " at index " +
                      std::to_string(i) + " is out of range; labels must be in [0, " + std::to_string(num_classes) +
                      ")");
    if (i < ds.count)
      ds.labels[i] = label;
    max_label = std::max(max_label, label);
  }
  ds.num_classes = num_classes > 0 ? num_classes : max_label + 1;
  ds.images = std::move(images.data);
  if (ds.count < total)  // as subset() names the samples it keeps
    ds.source += " (first " + std::to_string(ds.count) + ")";
  return ds;
}

std::string default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

TrainTest load_fashion_mnist(const std::string& folder, int64_t train_first, int64_t test_first) {
  const std::string dir = folder.empty() ? default_fashion_mnist_dir() : folder;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw DataError("Fashion-MNIST: the folder '" + dir + "' does not exist; " + fashion_hint());
  std::string paths[4];
  for (int i = 0; i < 4; ++i)
    paths[i] = find_fashion_file(dir, kFashionFiles[i]);

  TrainTest tt;
  tt.train = load_idx_pair(paths[0], paths[1], kFashionClasses, train_first);
  tt.test = load_idx_pair(paths[2], paths[3], kFashionClasses, test_first);
  return tt;
}

void require_samples(const Dataset& ds, const std::string& split) {
  if (ds.count <= 0)
    throw DataError("the " + split + " holds 0 images (" + ds.source +
                    "): a run needs at least one training and one test image");
}

Dataset subset(const Dataset& ds, int64_t n) {
  LATHE_CHECK(n >= 0, "subset: n must be >= 0, got ", n);
  n = std::min(n, ds.count);
  std::vector<int64_t> first(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    first[static_cast<size_t>(i)] = i;
  return select_samples(ds, first, " (first " + std::to_string(n) + ")");
}

Dataset select_samples(const Dataset& ds, const std::vector<int64_t>& indices, const std::string& what) {
  Dataset out;
  out.count = static_cast<int64_t>(indices.size());
  out.channels = ds.channels;
  out.rows = ds.rows;
  out.cols = ds.cols;
  out.num_classes = ds.num_classes;
  out.class_names = ds.class_names;
  out.channel_mean = ds.channel_mean;
  out.channel_std = ds.channel_std;
  out.source = ds.source + what;
  const int64_t per = ds.pixels_per_image();
  if (ds.is_float())
    out.float_images.resize(static_cast<size_t>(out.count * per));
  else
    out.images.resize(static_cast<size_t>(out.count * per));
  out.labels.resize(indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    LATHE_CHECK(i >= 0 && i < ds.count, "select_samples: index ", i, " outside [0, ", ds.count, ")");
    if (ds.is_float())
      std::copy(ds.float_image(i), ds.float_image(i) + per, out.float_images.begin() + static_cast<int64_t>(k) * per);
    else
      std::copy(ds.image(i), ds.image(i) + per, out.images.begin() + static_cast<int64_t>(k) * per);
    out.labels[k] = ds.labels[static_cast<size_t>(i)];
  }
  return out;
}

void check_dataset_shape(const Dataset& ds) {
  LATHE_CHECK(ds.count >= 0 && ds.channels >= 1 && ds.rows >= 1 && ds.cols >= 1, "dataset '", ds.source,
              "' has count ", ds.count, ", channels ", ds.channels, ", rows ", ds.rows, ", cols ", ds.cols);
  const auto values = static_cast<size_t>(ds.count * ds.pixels_per_image());
  const bool u8_ok = ds.images.size() == values && (ds.float_images.empty() || values == 0);
  const bool f32_ok = ds.float_images.size() == values && ds.images.empty();
  LATHE_CHECK((u8_ok || f32_ok) && ds.labels.size() == static_cast<size_t>(ds.count), "dataset '", ds.source,
              "' holds ", ds.images.size(), " u8 and ", ds.float_images.size(), " f32 values and ", ds.labels.size(),
              " labels for ", ds.count, " images of ", ds.channels, " x ", ds.rows, " x ", ds.cols);
  LATHE_CHECK(ds.channel_mean.size() == ds.channel_std.size() &&
                  (ds.channel_mean.empty() || static_cast<int64_t>(ds.channel_mean.size()) == ds.channels),
              "dataset '", ds.source, "': ", ds.channel_mean.size(), " channel means and ", ds.channel_std.size(),
              " stds for ", ds.channels, " channels");
}

}  // namespace lathe
