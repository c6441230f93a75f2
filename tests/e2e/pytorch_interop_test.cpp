// Interop with PyTorch: a student model trained and saved by PyTorch 2.15 (bench/peers/
// check_safetensors.py --export ... --model student --epochs 1, which printed test_acc 0.8417) loads
// into Lathe's zoo model by name and gives the same test accuracy on Fashion-MNIST.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/backend/backend.h"
#include "engine/data/dataset.h"
#include "engine/nn/model_io.h"
#include "engine/nn/zoo.h"
#include "engine/exec/batch_loop.h"

namespace lathe {
namespace {

TEST(PyTorchInterop, StudentTrainedInPyTorchKeepsItsAccuracy) {
  if (!std::filesystem::exists(default_fashion_mnist_dir() + "/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
  const std::string path = std::string(LATHE_SOURCE_DIR) + "/tests/data/fixtures/student_pytorch.safetensors";
  auto backend = make_backend("cpu");
  auto model = build_zoo_model("student");
  Rng rng(0);
  model->create_params(*backend, DType::f32, rng);
  load_model_weights(*model, *backend, path);

  const TrainTest data = load_fashion_mnist();
  const int64_t correct = evaluate(*model, *backend, data.test, 1000).correct;
  // PyTorch counted 8417 of 10000; float summation order may flip an image or two at the boundary.
  EXPECT_NEAR(static_cast<double>(correct), 8417.0, 3.0);
}

}  // namespace
}  // namespace lathe
