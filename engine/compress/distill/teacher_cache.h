// Teacher outputs remembered per training image. The teacher runs in evaluation mode, so its
// logits and tapped activations are a pure function of the image: when the student's batches are
// not augmented, every epoch shows it the same images again and their outputs can be looked up
// instead of recomputed (epochs 2.. then cost the teacher nothing). Keys are a 64-bit hash of the
// image's bytes (identical images have identical outputs, so duplicates are harmless). With
// augmentation on the stage does not use the cache: the teacher then runs on every batch.
//
// The cache can be kept in a file (distill.teacher_cache) so that several runs distilling from the
// same saved teacher (the 3-seed comparison) pay for the teacher's passes once; the file is keyed
// by the teacher weights' sha256, the sha256 of the ONNX file its graph came from (an ONNX
// teacher; run/stage_distill.h's teacher_cache_key) and the tapped nodes, and ignored (rebuilt)
// when they differ.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

class TeacherCache {
 public:
  /// `record_sizes`: per-sample element counts of what is stored (logits first, then each tap).
  TeacherCache(std::string key, std::vector<int64_t> record_sizes);

  /// XXH64 of one image's bytes (host, contiguous batch row).
  static uint64_t hash_image(const Tensor& images, int64_t row);
  /// XXH64 (xxHash's 64-bit hash, seed `seed`) of `len` bytes.
  static uint64_t xxh64(const unsigned char* p, size_t len, uint64_t seed = 0);

  /// Fills outs[k] rows (host tensors [B, ...], any layout, logical order) for every sample of the
  /// batch when all of them are cached; returns false (and touches nothing) on any miss.
  bool lookup(const std::vector<uint64_t>& hashes, std::vector<Tensor>& outs) const;
  /// Remembers the batch's outputs (host tensors, any layout).
  void insert(const std::vector<uint64_t>& hashes, const std::vector<const Tensor*>& outs);

  size_t size() const { return m_index.size(); }
  bool dirty() const { return m_dirty; }
  /// Test accuracy of the teacher stored with the cache (-1 when unknown) and the test-set size it was measured on.
  double test_accuracy = -1;
  int64_t test_samples = 0;

  /// Loads `path` when it exists and its key matches; returns whether it did. A file that is not a
  /// valid cache (bad magic, other key or sizes, a record count that does not fit the file's size,
  /// truncated) is ignored and rebuilt: load() returns false and load_note() says why. Nothing is
  /// allocated for the records before their count is checked against the file's real size.
  bool load(const std::string& path);
  /// Why the last load() ignored an existing file ("" when it loaded it or there was no file).
  const std::string& load_note() const { return m_load_note; }
  /// Writes the cache atomically (temp file + rename).
  void save(const std::string& path);

 private:
  std::string m_key;
  std::vector<int64_t> m_sizes;
  int64_t m_record = 0;
  std::vector<float> m_data;
  std::unordered_map<uint64_t, int64_t> m_index;  // hash -> record number
  bool m_dirty = false;
  std::string m_load_note;
};

}  // namespace lathe
