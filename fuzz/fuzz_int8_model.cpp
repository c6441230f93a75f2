// libFuzzer target: an INT8 model file (model_int8.safetensors). Lathe writes these but has no
// INT8 loader; the paths a user can point at one are the safetensors reader (its metadata: format,
// plan, weight_bits) and the f32 model loaders (model.init_from, a distill.teacher file), so the
// input goes through load_safetensors, load_model_weights and load_sparse_model_weights.
#include "engine/compress/prune/sparse_model_io.h"
#include "engine/nn/model_io.h"
#include "engine/nn/safetensors.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<lathe::Backend> be = lathe::make_backend("reference");
  static std::unique_ptr<lathe::Model> model = lathe::fuzz::tiny_model(*be);
  const std::string path = lathe::fuzz::input_file(data, size, "int8.safetensors");
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    const lathe::SafetensorsFile f = lathe::load_safetensors(path);
    for (const auto& [key, value] : f.metadata)
      if (key == "format" && value != "lathe-int8")
        return;
  });
  lathe::fuzz::refuse_only_with_lathe_errors([&] { lathe::load_model_weights(*model, *be, path); });
  lathe::fuzz::refuse_only_with_lathe_errors([&] { lathe::load_sparse_model_weights(*model, *be, path); });
  return 0;
}
