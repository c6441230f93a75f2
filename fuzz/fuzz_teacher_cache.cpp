// libFuzzer target: a distill.teacher_cache file through TeacherCache::load (key "fuzz-key", records
// of 10 logits + 6 tapped values, as fuzz/make_corpus.cpp writes it), then a lookup of every record.
#include "engine/compress/distill/teacher_cache.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lathe::fuzz::input_file(data, size, "teacher.cache");
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    lathe::TeacherCache cache("fuzz-key", {10, 6});
    if (!cache.load(path))
      return;
    // Every hash the file holds is unknown to us; look up one batch of made-up hashes (a miss).
    std::vector<lathe::Tensor> outs = {lathe::Tensor::empty({2, 10}, lathe::DType::f32),
                                       lathe::Tensor::empty({2, 6}, lathe::DType::f32)};
    cache.lookup({1, 2}, outs);
    if (cache.size() * (8 + 16 * 4) > size)
      std::abort();  // more records than the file can hold
  });
  return 0;
}
