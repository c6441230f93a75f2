// Labelled image sets from NumPy arrays: one .npz with x_train, y_train, x_test, y_test, or a folder
// holding x_train.npy, y_train.npy, x_test.npy, y_test.npy. Images are N,H,W (one channel) or
// N,C,H,W, uint8 (0..255) or float32 (intensities, 0 = black, 1 = white); labels are N integers.
#pragma once

#include <cstdint>
#include <string>

#include "engine/data/dataset.h"
#include "engine/data/npy_reader.h"

namespace lathe {

/// A Dataset from an image array and a label array; `images_name` / `labels_name` name them in
/// errors. `num_classes` > 0 refuses labels >= num_classes; 0 counts them (largest label + 1).
/// DataError for another rank or dtype, a count mismatch, a negative or out-of-range label, or
/// a float image that is not finite.
Dataset dataset_from_arrays(const NpyArray& images, const std::string& images_name, const NpyArray& labels,
                            const std::string& labels_name, int num_classes = 0);

/// Loads the four arrays from `path` (a .npz file, or a folder of .npy files). The test split's
/// classes default to the training split's. DataError naming the file for anything missing or malformed.
/// `train_first` / `test_first` > 0 read only that many leading images of each split (data.train_subset,
/// data.test_subset: a deflated archive is inflated only that far); every label is still read and
/// checked. What lies past them (a non-finite float, a corrupt tail, a wrong CRC) goes unnoticed.
TrainTest load_numpy_dataset(const std::string& path, int num_classes = 0, int64_t train_first = 0,
                             int64_t test_first = 0);

}  // namespace lathe
