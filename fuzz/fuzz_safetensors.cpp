// libFuzzer target: a safetensors file through load_safetensors; every tensor it returns must
// hold exactly the bytes its shape and dtype need.
#include "engine/nn/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lathe::fuzz::input_file(data, size, "input.safetensors");
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    const lathe::SafetensorsFile f = lathe::load_safetensors(path);
    uint64_t total = 0;
    for (const auto& [name, t] : f.tensors)
      total += t.nbytes();
    if (total > size)
      std::abort();  // more tensor bytes than the file holds
  });
  return 0;
}
