// load_run_data: the dataset kinds, subsets and per-channel normalisation; the data's run record.
#include "engine/run/data_setup.h"

#include <algorithm>

#include "engine/data/array_dataset.h"
#include "engine/data/channel_stats.h"
#include "engine/data/image_folder.h"

namespace lathe {

TrainTest load_run_data(const DataConfig& d) {
  TrainTest tt;
  // Every kind decodes only the first train_subset / test_subset images (the samples subset() keeps,
  // in the same order).
  switch (d.dataset) {
    case DatasetKind::fashion_mnist:
      tt = load_fashion_mnist(d.path, d.train_subset, d.test_subset);
      break;
    case DatasetKind::idx:
      tt.train = load_idx_pair(d.train_images, d.train_labels, 0, d.train_subset);
      tt.test = load_idx_pair(d.test_images, d.test_labels, tt.train.num_classes, d.test_subset);
      break;
    case DatasetKind::npz:
      tt = load_numpy_dataset(d.path, d.num_classes, d.train_subset, d.test_subset);
      break;
    case DatasetKind::folder:
      tt = load_image_folder(d.path, d.image_size, d.channels, d.train_subset, d.test_subset);
      break;
  }
  require_samples(tt.train, "training set");
  require_samples(tt.test, "test set");
  if (d.train_subset > 0 && d.train_subset < tt.train.count)
    tt.train = subset(tt.train, d.train_subset);
  if (d.test_subset > 0 && d.test_subset < tt.test.count)
    tt.test = subset(tt.test, d.test_subset);
  if (d.dataset == DatasetKind::npz || d.dataset == DatasetKind::folder) {
    // IDX data keeps Fashion-MNIST's published constants (the loader's defaults), as it always had.
    const ChannelStats stats = compute_channel_stats(tt.train);
    set_normalisation(tt.train, stats);
    set_normalisation(tt.test, stats);
  }
  return tt;
}

int zoo_class_count(const DataConfig& d, const Dataset& train) {
  if (d.dataset == DatasetKind::fashion_mnist || d.dataset == DatasetKind::idx)
    return std::max(10, train.num_classes);
  return train.num_classes;
}

nlohmann::json data_record(const DataConfig& d, const TrainTest& data) {
  const Dataset& t = data.train;
  nlohmann::json r = {{"dataset", std::string(enum_name(d.dataset))},
                      {"channels", t.channels},
                      {"rows", t.rows},
                      {"cols", t.cols},
                      {"num_classes", t.num_classes},
                      {"pixel_type", t.is_float() ? "float32" : "uint8"}};
  if (!t.class_names.empty())
    r["class_names"] = t.class_names;
  if (!t.channel_mean.empty())
    r["normalisation"] = {{"mean", t.channel_mean}, {"std", t.channel_std}, {"computed_on", "training split"}};
  else
    r["normalisation"] = {{"mean", kFashionMean}, {"std", kFashionStd}, {"computed_on", "Fashion-MNIST constants"}};
  return r;
}

}  // namespace lathe
