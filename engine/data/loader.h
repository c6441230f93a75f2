// DataLoader: turns a Dataset into normalised f32 batches, shuffled and augmented deterministically,
// with ONE background thread preparing batches ahead of the training loop (a bounded queue).
//
// Determinism: the epoch's order is a Fisher-Yates shuffle driven by lathe::Rng seeded from
// (seed, epoch); each sample's augmentation uses its own Rng seeded from (seed, epoch, sample index).
// So the same seed gives bit-identical batches on every run and platform, whatever the prefetch depth
// or thread timing, and a sample's augmentation does not depend on the batch size or its position.
//
// Data parallelism (rank, world_size): every rank shuffles the same epoch order and cuts it into
// global batches of world_size x batch_size samples; rank r takes the r-th of world_size even,
// contiguous parts of each one. So N ranks x batch B see, together, exactly the batches of one rank x
// batch N*B, and a rank's share never overlaps another's. A last global batch smaller than the
// number of ranks (some rank would get no sample) is dropped.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/data/augment.h"
#include "engine/data/dataset.h"

namespace lathe {

struct Batch {
  Tensor images;      // f32 [B, C, rows, cols], normalised per channel: (p / 255 - mean[c]) / std[c]
  Tensor labels;      // s32 [B]
  int64_t index = 0;  // batch number within the epoch
  /// Samples of the global batch this one is a share of (all ranks together; = images.dim(0) on one rank).
  int64_t global_size = 0;
};

struct LoaderOptions {
  int64_t batch_size = 128;  // per rank: a global batch holds world_size x batch_size samples
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;  // drop the last batch when it would be smaller than batch_size
  AugmentOptions augment;
  /// Optional hook run on the worker thread on each finished batch (e.g. to convert its layout);
  /// an exception it throws is rethrown by next().
  std::function<void(Batch&)> on_batch;
  float mean = kFashionMean;  // of pixel intensities in [0, 1], every channel; a dataset's own
  float std = kFashionStd;    // channel_mean / channel_std take precedence
  int prefetch = 2;    // batches prepared ahead by the background thread (at least 1)
  int rank = 0;        // this rank's share of every global batch (0 <= rank < world_size)
  int world_size = 1;  // ranks sharing the epoch
};

/// Batches per epoch of `count` samples with these options (each rank gets the same number).
int64_t loader_batches_per_epoch(int64_t count, const LoaderOptions& options);

class DataLoader {
 public:
  /// `dataset` must outlive the loader (it is read, not copied). Throws lathe::Error for a
  /// batch_size < 1, std <= 0 or an inconsistent dataset, lathe::ConfigError for bad augment options.
  DataLoader(const Dataset& dataset, LoaderOptions options);
  /// Stops the worker, even mid-epoch; never throws.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Begins (or restarts) an epoch: the order is reshuffled from (seed, epoch), batches already
  /// prepared for a previous epoch are dropped, and the worker starts on batch `first_batch`
  /// (a resumed run continues mid-epoch with the very batches it would have had).
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  /// The next batch of the current epoch; false once all of them were handed out. Blocks while the
  /// worker prepares it; rethrows an exception the worker hit. Throws lathe::Error before start_epoch.
  bool next(Batch& out);

  int64_t batches_per_epoch() const;
  /// Samples handed out per epoch to all ranks together (count, less the dropped tail).
  int64_t samples_per_epoch() const;
  /// The sample indices of `epoch` in the order they are batched, for all ranks (identity when !shuffle).
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  const LoaderOptions& options() const { return m_options; }
  const Dataset& dataset() const { return *m_dataset; }

 private:
  const Dataset* m_dataset;
  LoaderOptions m_options;
  std::vector<std::array<float, 256>> m_tables;  // per channel: u8 pixel -> normalised float
  std::vector<PixelSpace> m_spaces;              // per channel
  bool m_augment = false;
  std::vector<float> m_scratch;  // worker thread only

  std::mutex m_mutex;
  std::condition_variable m_work_cv;   // the worker waits for an epoch, or room in the queue
  std::condition_variable m_ready_cv;  // next() waits for a batch
  std::deque<Batch> m_queue;
  size_t m_capacity = 2;
  bool m_stop = false;
  bool m_started = false;
  uint64_t m_generation = 0;  // bumped by start_epoch, so stale batches are dropped
  int64_t m_epoch = 0;
  std::shared_ptr<const std::vector<int64_t>> m_order;
  int64_t m_num_batches = 0;
  int64_t m_next_to_make = 0;
  int64_t m_handed_out = 0;
  std::exception_ptr m_error;
  std::thread m_worker;

  void worker_loop();
  Batch make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t index);
};

}  // namespace lathe
