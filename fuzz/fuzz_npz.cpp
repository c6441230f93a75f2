// libFuzzer target: a .npz archive (zip, through libzip) opened as NpzArchive, every member read
// (size claims, inflate, CRC, the .npy inside), then the same file through load_numpy_dataset
// (x_train, y_train, x_test, y_test and the dataset checks).
#include "engine/data/array_dataset.h"
#include "engine/data/npz_reader.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lathe::fuzz::input_file(data, size, "input.npz");
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    const lathe::NpzArchive npz(path);
    const std::vector<std::string> names = npz.names();
    for (size_t i = 0; i < names.size() && i < 16; ++i)
      lathe::fuzz::refuse_only_with_lathe_errors([&] {
        const lathe::NpyArray a = npz.read(names[i]);
        if (a.data.size() != a.header.data_bytes())
          std::abort();  // a member must hold exactly what its header promises
      });
  });
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    const lathe::TrainTest tt = lathe::load_numpy_dataset(path);
    if (tt.train.labels.size() != static_cast<size_t>(tt.train.count))
      std::abort();
  });
  return 0;
}
