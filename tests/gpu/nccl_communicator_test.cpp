// NcclCommunicator (engine/dist/nccl): the Communicator of GPU ranks. Without a device: a host
// backend is refused by name, and host tensors and sums go through the host communicator. On a
// device: one rank's NCCL mean is the gradient bit for bit and its broadcast leaves the values;
// a training run through a 1-rank NCCL communicator equals the plain single-device run bit for bit;
// on a machine with two GPUs, two ranks (threads) average their gradients as the CPU does.
// Label gpu: the device cases skip with the reason without one.
#ifdef LATHE_HAVE_CUDA
#include <cstring>
#include <thread>

#include "engine/dist/gloo_communicator.h"
#include "engine/dist/nccl/nccl_communicator.h"
#include "engine/nn/safetensors.h"
#include "engine/run/trainer.h"
#include "tests/data/data_test_util.h"
#include "tests/gpu/gpu_test_support.h"
#include "tests/support/config_from.h"

namespace lathe {
namespace {

using gputest::CudaTest;

std::shared_ptr<dist::GlooCommunicator> gloo(int rank, int world, const std::string& dir) {
  dist::GlooOptions o;
  o.rendezvous = dir;
  o.run_id = "nccl-test";
  o.timeout_s = 60;
  return std::make_shared<dist::GlooCommunicator>(rank, world, o);
}

TEST(NcclCommunicator, RefusesAHostBackendAndPassesHostWorkToTheHostCommunicator) {
  test::TempDir dir;
  cuda::NcclCommunicator comm(gloo(0, 1, dir.path()));
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world_size(), 1);
  auto ref = make_backend("reference");
  try {
    comm.attach(*ref);
    FAIL() << "a reference backend must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not cuda"), std::string::npos) << e.what();
  }
  // Host parameters (a ZeRO-1 checkpoint's staging copies) need no NCCL: the host communicator has them.
  Param p;
  p.value = Tensor::zeros({3}, DType::f32);
  p.grad = Tensor::zeros({3}, DType::f32);
  p.grad.set_flat(1, 0.5);
  EXPECT_NO_THROW(comm.all_reduce_gradients({NamedParam{"w", &p}}));
  EXPECT_NO_THROW(comm.broadcast_parameters({NamedParam{"w", &p}}, 0));
  EXPECT_EQ(p.grad.at_flat(1), 0.5);
  std::string bytes = "id";
  comm.broadcast_bytes(bytes, 0);
  EXPECT_EQ(bytes, "id");
  double v[2] = {1, 2};
  comm.all_reduce_sum(v, 2);
  EXPECT_EQ(v[1], 2);
}

class CudaNcclCommunicator : public CudaTest {};

TEST_F(CudaNcclCommunicator, OneRanksMeanIsTheGradientAndItsBroadcastKeepsTheValues) {
  test::TempDir dir;
  cuda::NcclCommunicator comm(gloo(0, 1, dir.path()));
  comm.attach(gpu());
  EXPECT_EQ(comm.device(), 0);
  Rng rng(gputest::base_seed() + 700);
  std::vector<Param> params(3);
  std::vector<NamedParam> named;
  std::vector<Tensor> grads, values;
  const std::vector<Shape> shapes{{257}, {64, 33}, {5, 3, 3, 3}};
  for (size_t i = 0; i < params.size(); ++i) {
    grads.push_back(gputest::host_random(shapes[i], rng));
    values.push_back(gputest::host_random(shapes[i], rng));
    params[i].grad = up(grads[i]);
    params[i].value = up(values[i]);
    named.push_back({"p" + std::to_string(i), &params[i]});
  }
  comm.all_reduce_gradients(named);
  comm.broadcast_parameters(named, 0);
  int64_t bytes = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor g = down(params[i].grad), v = down(params[i].value);
    EXPECT_EQ(std::memcmp(g.raw(), grads[i].raw(), g.nbytes()), 0) << named[i].name;
    EXPECT_EQ(std::memcmp(v.raw(), values[i].raw(), v.nbytes()), 0) << named[i].name;
    bytes += static_cast<int64_t>(g.nbytes());
  }
  EXPECT_EQ(comm.bytes_last_step(), bytes);
}

TEST_F(CudaNcclCommunicator, ATrainingRunThroughOneNcclRankEqualsThePlainRunBitForBit) {
  test::TempDir dir;
  for (const char* split : {"train", "test"}) {
    std::vector<uint8_t> pixels(64 * 8 * 8), labels(64);
    for (size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<uint8_t>((i * 37) ^ (i >> 3));
    for (size_t i = 0; i < labels.size(); ++i)
      labels[i] = static_cast<uint8_t>(pixels[i * 64 + 9] % 3);
    test::write_bytes(dir.file(std::string(split) + "-images"), test::idx_bytes({64, 8, 8}, pixels));
    test::write_bytes(dir.file(std::string(split) + "-labels"), test::idx_bytes({64}, labels));
  }
  auto run = [&](const std::string& out, std::shared_ptr<Communicator> comm) {
    const ExperimentConfig cfg = test::config_from(
        {"data.dataset=idx", "data.train_images=" + dir.file("train-images"),
         "data.train_labels=" + dir.file("train-labels"), "data.test_images=" + dir.file("test-images"),
         "data.test_labels=" + dir.file("test-labels"), "model.zoo=custom",
         R"(model.layers=[{"type":"flatten"},{"type":"linear","out":16},{"type":"relu"},{"type":"linear","out":3}])",
         "train.epochs=2", "train.batch_size=8", "compute.backend=cuda", "checkpoint.every_min=0",
         "output.dir=" + dir.file(out)});
    RunOptions options;
    options.run_id = out;
    options.comm = std::move(comm);
    return run_experiment(cfg, options);
  };
  const RunSummary plain = run("plain", nullptr);
  const RunSummary nccl = run("nccl", std::make_shared<cuda::NcclCommunicator>(gloo(0, 1, dir.file("store"))));
  for (const char* m : {"train/loss", "test/loss", "test/accuracy"})
    EXPECT_EQ(nccl.final_metrics.at(m), plain.final_metrics.at(m)) << m;
  const SafetensorsFile a = load_safetensors(dir.file("plain") + "/plain/model.safetensors");
  const SafetensorsFile b = load_safetensors(dir.file("nccl") + "/nccl/model.safetensors");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i)
    EXPECT_EQ(std::memcmp(a.tensors[i].second.raw(), b.tensors[i].second.raw(), a.tensors[i].second.nbytes()), 0)
        << a.tensors[i].first;
}

TEST_F(CudaNcclCommunicator, TwoGpuRanksAverageTheirGradientsAsTheCpuMean) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "one GPU here: two NCCL ranks need two GPUs (NCCL refuses two ranks on one device)";
  test::TempDir dir;
  Rng rng(gputest::base_seed() + 701);
  const Shape shape{1000, 37};
  const Tensor g0 = gputest::host_random(shape, rng), g1 = gputest::host_random(shape, rng);
  std::vector<Tensor> got(2);
  std::vector<std::string> errors(2);
  auto rank_main = [&](int r) {
    try {
      cuda::CudaBackend be(r);
      cuda::NcclCommunicator comm(gloo(r, 2, dir.path()));
      comm.attach(be);
      Param p;
      p.grad = be.empty(shape, DType::f32);
      be.copy(r == 0 ? g0 : g1, p.grad);
      comm.all_reduce_gradients({NamedParam{"w", &p}});
      got[static_cast<size_t>(r)] = Tensor::empty(shape, DType::f32);
      be.copy(p.grad, got[static_cast<size_t>(r)]);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  int64_t wrong = 0;
  for (int64_t i = 0; i < g0.numel(); ++i) {
    const float want = (g0.data<float>()[i] + g1.data<float>()[i]) * 0.5f;  // halving is exact
    wrong += got[0].data<float>()[i] != want || got[1].data<float>()[i] != want;
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
