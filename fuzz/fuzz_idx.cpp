// libFuzzer target: an IDX file (plain or gzip, by its content) through read_idx, any rank.
#include "engine/data/idx_reader.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lathe::fuzz::input_file(data, size, "input-idx");
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    const lathe::IdxArray a = lathe::read_idx(path);
    int64_t n = 1;
    for (int64_t d : a.dims)
      n *= d;
    if (n != static_cast<int64_t>(a.data.size()))
      std::abort();  // the reader must return exactly what the header promises
  });
  return 0;
}
