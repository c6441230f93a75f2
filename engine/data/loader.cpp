// DataLoader: epoch orders, batch assembly (table-driven u8 -> f32 normalisation plus optional
// augmentation) and the producer/consumer hand-off with the one prefetch thread.
#include "engine/data/loader.h"

#include <algorithm>
#include <numeric>

#include "engine/core/error.h"

namespace lathe {
namespace {

constexpr uint64_t kShuffleSalt = 0x53485546464c45ull;  // "SHUFFLE"
constexpr uint64_t kAugmentSalt = 0x4155474d454e54ull;  // "AUGMENT"

/// Mixes `value` into `key` (the splitmix64 finaliser over their combination): distinct inputs give
/// unrelated seeds, the same inputs the same seed on every platform.
uint64_t mix64(uint64_t key, uint64_t value) {
  uint64_t z = key ^ (value + 0x9e3779b97f4a7c15ull + (key << 6) + (key >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

int64_t loader_batches_per_epoch(int64_t count, const LoaderOptions& o) {
  const int64_t global = o.batch_size * o.world_size;
  const int64_t full = count / global, tail = count % global;
  if (o.drop_last || tail == 0)
    return full;
  return tail >= o.world_size ? full + 1 : full;  // a tail too small to give every rank a sample is dropped
}

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions options)
    : m_dataset(&dataset), m_options(std::move(options)) {
  const Dataset& ds = dataset;
  LATHE_CHECK(m_options.batch_size >= 1, "DataLoader: batch_size must be >= 1, got ", m_options.batch_size);
  LATHE_CHECK(m_options.world_size >= 1 && m_options.rank >= 0 && m_options.rank < m_options.world_size,
              "DataLoader: rank ", m_options.rank, " of world size ", m_options.world_size);
  LATHE_CHECK(m_options.std > 0, "DataLoader: std must be > 0, got ", m_options.std);
  check_dataset_shape(ds);
  validate_augment(m_options.augment);

  for (int64_t c = 0; c < ds.channels; ++c) {
    const bool own = !ds.channel_mean.empty();
    const float mean = own ? ds.channel_mean[static_cast<size_t>(c)] : m_options.mean;
    const float std = own ? ds.channel_std[static_cast<size_t>(c)] : m_options.std;
    LATHE_CHECK(std > 0, "DataLoader: dataset '", ds.source, "' channel ", c, " has std ", std, " (must be > 0)");
    m_spaces.push_back(PixelSpace{mean, std});
    std::array<float, 256> table;
    for (int v = 0; v < 256; ++v)
      table[static_cast<size_t>(v)] = (static_cast<float>(v) / 255.0f - mean) / std;
    m_tables.push_back(table);
  }
  m_augment = augment_enabled(m_options.augment);
  if (m_augment)
    m_scratch.resize(static_cast<size_t>(ds.pixels_per_image()));
  m_capacity = static_cast<size_t>(std::max(m_options.prefetch, 1));
  m_num_batches = batches_per_epoch();
  m_worker = std::thread([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_work_cv.notify_all();
  try {
    if (m_worker.joinable())
      m_worker.join();
  } catch (...) {
    // join only throws for a thread that cannot be joined; nothing left to clean up then
  }
}

int64_t DataLoader::batches_per_epoch() const { return loader_batches_per_epoch(m_dataset->count, m_options); }

int64_t DataLoader::samples_per_epoch() const {
  const int64_t global = m_options.batch_size * m_options.world_size;
  return std::min(m_dataset->count, batches_per_epoch() * global);
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(m_dataset->count));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!m_options.shuffle)
    return order;
  // Fisher-Yates with our own Rng: std::shuffle's results differ between standard libraries.
  Rng rng(mix64(mix64(m_options.seed, kShuffleSalt), static_cast<uint64_t>(epoch)));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.below(i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  LATHE_CHECK(first_batch >= 0 && first_batch <= m_num_batches, "DataLoader::start_epoch: first batch ", first_batch,
              " of ", m_num_batches);
  auto order = std::make_shared<const std::vector<int64_t>>(epoch_order(epoch));
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    ++m_generation;
    m_started = true;
    m_epoch = epoch;
    m_order = std::move(order);
    m_queue.clear();
    m_next_to_make = first_batch;
    m_handed_out = first_batch;
    m_error = nullptr;
  }
  m_work_cv.notify_all();
}

bool DataLoader::next(Batch& out) {
  std::unique_lock<std::mutex> lock(m_mutex);
  LATHE_CHECK(m_started, "DataLoader::next() called before start_epoch()");
  if (m_handed_out >= m_num_batches)
    return false;
  m_ready_cv.wait(lock, [&] { return !m_queue.empty() || m_error; });
  if (m_queue.empty())
    std::rethrow_exception(m_error);  // batches made before the failure come first
  out = std::move(m_queue.front());
  m_queue.pop_front();
  ++m_handed_out;
  lock.unlock();
  m_work_cv.notify_all();
  return true;
}

void DataLoader::worker_loop() {
  std::unique_lock<std::mutex> lock(m_mutex);
  for (;;) {
    m_work_cv.wait(lock, [&] {
      return m_stop || (m_started && !m_error && m_next_to_make < m_num_batches && m_queue.size() < m_capacity);
    });
    if (m_stop)
      return;
    const uint64_t generation = m_generation;
    const int64_t epoch = m_epoch;
    const int64_t index = m_next_to_make++;
    const std::shared_ptr<const std::vector<int64_t>> order = m_order;
    lock.unlock();

    Batch batch;
    std::exception_ptr error;
    try {
      batch = make_batch(*order, epoch, index);
    } catch (...) {
      error = std::current_exception();
    }

    lock.lock();
    if (generation != m_generation)
      continue;  // start_epoch ran meanwhile: this batch is stale
    if (error)
      m_error = error;
    else
      m_queue.push_back(std::move(batch));
    m_ready_cv.notify_one();
  }
}

Batch DataLoader::make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t index) {
  const Dataset& ds = *m_dataset;
  // This rank's even, contiguous part of global batch `index` (the whole batch on one rank).
  const int64_t world = m_options.world_size, rank = m_options.rank;
  const int64_t global_begin = index * m_options.batch_size * world;
  const int64_t global_size = std::min(m_options.batch_size * world, ds.count - global_begin);
  const int64_t begin = global_begin + global_size * rank / world;
  const int64_t size = global_begin + global_size * (rank + 1) / world - begin;
  const int64_t pixels = ds.pixels_per_image(), plane = ds.plane();

  Batch batch;
  batch.index = index;
  batch.global_size = global_size;
  // A fresh 64-byte aligned allocation per batch: the caller may keep a batch's tensors alive (e.g.
  // saved for backward), so reusing them from a pool would need ownership tracking Tensor lacks.
  batch.images = Tensor::empty({size, ds.channels, ds.rows, ds.cols}, DType::f32);
  batch.labels = Tensor::empty({size}, DType::s32);
  float* images = batch.images.data<float>();
  int32_t* labels = batch.labels.data<int32_t>();
  const uint64_t augment_key = mix64(mix64(m_options.seed, kAugmentSalt), static_cast<uint64_t>(epoch));

  for (int64_t k = 0; k < size; ++k) {
    const int64_t sample = order[static_cast<size_t>(begin + k)];
    float* dst = images + k * pixels;
    labels[k] = ds.labels[static_cast<size_t>(sample)];
    float* out = m_augment ? m_scratch.data() : dst;
    for (int64_t c = 0; c < ds.channels; ++c) {
      float* plane_out = out + c * plane;
      if (ds.is_float()) {
        const float* src = ds.float_image(sample) + c * plane;
        const PixelSpace& space = m_spaces[static_cast<size_t>(c)];
        for (int64_t p = 0; p < plane; ++p)
          plane_out[p] = (src[p] - space.mean) / space.std;
      } else {
        const uint8_t* src = ds.image(sample) + c * plane;
        const float* table = m_tables[static_cast<size_t>(c)].data();
        for (int64_t p = 0; p < plane; ++p)
          plane_out[p] = table[src[p]];
      }
    }
    if (!m_augment)
      continue;
    Rng rng(mix64(augment_key, static_cast<uint64_t>(sample)));
    augment_channels(out, dst, ds.channels, ds.rows, ds.cols, m_options.augment, rng, m_spaces);
  }
  if (m_options.on_batch)
    m_options.on_batch(batch);
  return batch;
}

}  // namespace lathe
