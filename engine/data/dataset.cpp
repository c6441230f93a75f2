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

Dataset load_idx_pair(const std::string& images_path, const std::string& labels_path, int num_classes) {
  IdxArray images = read_idx(images_path, 3);
  IdxArray labels = read_idx(labels_path, 1);

  Dataset ds;
  ds.count = images.dims[0];
  ds.rows = images.dims[1];
  ds.cols = images.dims[2];
  ds.source = images_path + " + " + labels_path;
  if (ds.rows < 1 || ds.cols < 1)
    throw DataError("IDX file '" + images_path + "': images of " + std::to_string(ds.rows) + " x " +
                    std::to_string(ds.cols) + " pixels; rows and cols must be at least 1");
  if (labels.dims[0] != ds.count)
    throw DataError("image/label count mismatch: images file '" + images_path + "' holds " + std::to_string(ds.count) +
                    " images but labels file '" + labels_path + "' holds " + std::to_string(labels.dims[0]) +
                    " labels");

  ds.labels.resize(static_cast<size_t>(ds.count));
  int max_label = -1;
  for (int64_t i = 0; i < ds.count; ++i) {
    const int label = labels.data[i];
    if (num_classes > 0 && label >= num_classes)
      throw DataError("IDX file '" + labels_path + "': label " + std::to_string(label) + " at index " +
                      std::to_string(i) + " is out of range; labels must be in [0, " + std::to_string(num_classes) +
                      ")");
    ds.labels[i] = label;
    max_label = std::max(max_label, label);
  }
  ds.num_classes = num_classes > 0 ? num_classes : max_label + 1;
  ds.images = std::move(images.data);
  return ds;
}

std::string default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

TrainTest load_fashion_mnist(const std::string& folder) {
  const std::string dir = folder.empty() ? default_fashion_mnist_dir() : folder;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw DataError("Fashion-MNIST: the folder '" + dir + "' does not exist; " + fashion_hint());
  std::string paths[4];
  for (int i = 0; i < 4; ++i)
    paths[i] = find_fashion_file(dir, kFashionFiles[i]);

  TrainTest tt;
  tt.train = load_idx_pair(paths[0], paths[1], kFashionClasses);
  tt.test = load_idx_pair(paths[2], paths[3], kFashionClasses);
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
  Dataset out;
  out.count = n;
  out.rows = ds.rows;
  out.cols = ds.cols;
  out.num_classes = ds.num_classes;
  out.source = ds.source + " (first " + std::to_string(n) + ")";
  const size_t pixels = static_cast<size_t>(n * ds.rows * ds.cols);
  out.images.assign(ds.images.begin(), ds.images.begin() + pixels);
  out.labels.assign(ds.labels.begin(), ds.labels.begin() + n);
  return out;
}

}  // namespace lathe
