// The run's data from its config: every data.dataset kind loaded and checked, subsets taken (IDX,
// Fashion-MNIST and image folders decode only the images a subset keeps), and
// for NumPy and image-folder data the per-channel normalisation computed on the training split (and
// applied to both). What is recorded with the run about it (data_record) goes in the started event.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/data/dataset.h"
#include "engine/run/config.h"

namespace lathe {

/// Loads data.dataset; DataError naming the file for anything malformed, an empty split refused.
TrainTest load_run_data(const DataConfig& d);

/// Outputs of a zoo model for this data: the class count, at least 10 for IDX and Fashion-MNIST
/// data (the zoo's historical head, so those runs and their saved weights stay as they were).
int zoo_class_count(const DataConfig& d, const Dataset& train);

/// The data's shape, classes (and names) and normalisation, for the run record.
nlohmann::json data_record(const DataConfig& d, const TrainTest& data);

}  // namespace lathe
