// Whether Fashion-MNIST (Debian's dataset-fashion-mnist) is installed where the engine looks for it:
// the tests that train on it skip without it.
#pragma once

#include <filesystem>

#include "engine/data/dataset.h"

namespace lathe::test {

inline bool have_fashion_mnist() {
  return std::filesystem::exists(default_fashion_mnist_dir() + "/train-images-idx3-ubyte.gz");
}

}  // namespace lathe::test
