// libFuzzer target: a .npy file through read_npy and the same bytes through parse_npy (an .npz
// member's path): both must accept or refuse alike and agree on the header; an accepted array's
// elements are read, and a 3-D/4-D array goes through dataset_from_arrays as images (a 1-D integer
// array as labels), so the shape rules after the header are fuzzed too.
#include <cstring>

#include "engine/data/array_dataset.h"
#include "engine/data/npy_reader.h"
#include "fuzz/fuzz_util.h"

namespace {

/// An integer label array of `n` zeros.
lathe::NpyArray zero_labels(int64_t n) {
  return lathe::parse_npy(lathe::npy_bytes(lathe::NpyDtype::u8, {n}, std::vector<uint8_t>(static_cast<size_t>(n))),
                          "labels");
}

/// `n` 1x1 uint8 images.
lathe::NpyArray tiny_images(int64_t n) {
  return lathe::parse_npy(
      lathe::npy_bytes(lathe::NpyDtype::u8, {n, 1, 1}, std::vector<uint8_t>(static_cast<size_t>(n), 7)), "images");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lathe::fuzz::input_file(data, size, "input.npy");
  bool file_ok = false, memory_ok = false;
  lathe::NpyArray from_file, from_memory;
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    from_file = lathe::read_npy(path);
    file_ok = true;
  });
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    from_memory = lathe::parse_npy(std::vector<uint8_t>(data, data + size), "member.npy");
    memory_ok = true;
  });
  if (file_ok != memory_ok)
    std::abort();  // the file reader and the in-memory parser disagree
  if (!file_ok)
    return 0;
  const lathe::NpyArray& a = from_file;
  if (a.header.shape != from_memory.header.shape || a.header.dtype != from_memory.header.dtype ||
      a.data != from_memory.data || a.data.size() != a.header.data_bytes() ||
      a.header.data_offset + a.data.size() != size)
    std::abort();  // the two disagree, or the data is not exactly what the header promises
  const int64_t n = a.header.count();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += a.as_double(i) + static_cast<double>(a.as_int(i) & 1);
  volatile double sink = sum;  // keeps the element reads from being optimised away
  (void)sink;
  // Within the bytes that are there, the first dimension bounds the label array made for it.
  const auto& shape = a.header.shape;
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    if ((shape.size() == 3 || shape.size() == 4) && shape[0] <= static_cast<int64_t>(size))
      (void)lathe::dataset_from_arrays(a, "images", zero_labels(shape[0]), "labels");
    if (shape.size() == 1 && shape[0] <= static_cast<int64_t>(size))
      (void)lathe::dataset_from_arrays(tiny_images(shape[0]), "images", a, "labels");
  });
  return 0;
}
