// libFuzzer target: a sparse model file (CSR / bitmask weights in safetensors) through
// load_sparse_model_weights into fuzz_util.h's tiny model.
#include "engine/compress/prune/sparse_model_io.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<lathe::Backend> be = lathe::make_backend("reference");
  static std::unique_ptr<lathe::Model> model = lathe::fuzz::tiny_model(*be);
  const std::string path = lathe::fuzz::input_file(data, size, "sparse.safetensors");
  lathe::fuzz::refuse_only_with_lathe_errors([&] { lathe::load_sparse_model_weights(*model, *be, path); });
  return 0;
}
