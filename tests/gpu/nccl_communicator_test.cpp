// NcclCommunicator (engine/dist/nccl): the Communicator of GPU ranks. Without a device: a host
// backend is refused by name, host tensors and sums go through the host communicator, the overlap
// hook is refused before attach() and the bucket size comes from the host (compute.bucket_mb). On a
// device: one rank's NCCL mean is the gradient bit for bit and its broadcast leaves the values; a
// training run through a 1-rank NCCL communicator (overlapped, several buckets) equals the plain
// single-device run bit for bit; SGD steps whose gradient buckets go on the communication stream
// during the backward pass equal blocking steps bit for bit, and what the communication stream read
// is what the backward pass wrote (the compute stream is held before the backward pass, so a bucket
// that did not wait for it would read the NaN the gradients were poisoned with); on a machine with
// two GPUs, two ranks (threads) average their gradients as the CPU does, and overlapped steps equal
// blocking ones there too.
// Label gpu: the device cases skip with the reason without one.
#ifdef LATHE_HAVE_CUDA
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include "engine/dist/gloo_communicator.h"
#include "engine/dist/nccl/nccl_communicator.h"
#include "engine/nn/safetensors.h"
#include "engine/nn/zoo.h"
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

/// Runs rank_main(0) here and rank_main(1) on a thread (one GPU each); each rank's exception
/// message, or "".
std::vector<std::string> on_two_ranks(const std::function<void(int)>& rank_main) {
  std::vector<std::string> errors(2);
  auto guarded = [&](int r) {
    try {
      rank_main(r);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  };
  std::thread t1(guarded, 1);
  guarded(0);
  t1.join();
  return errors;
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
  // Overlap needs the device: refused before attach(), naming it. Buckets: compute.bucket_mb of
  // the host (Gloo's 25 MiB default here), or the size given.
  try {
    comm.grad_ready_hook({NamedParam{"w", &p}});
    FAIL() << "grad_ready_hook before attach() must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("before attach()"), std::string::npos) << e.what();
  }
  EXPECT_EQ(comm.bucket_bytes(), int64_t{25} << 20);
  EXPECT_EQ(cuda::NcclCommunicator(gloo(0, 1, dir.file("b")), 4096).bucket_bytes(), 4096);
  EXPECT_EQ(comm.last_buckets_started_early(), 0);
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
  // 1 KiB buckets: the 1091 parameters (4.3 KiB) go in 5, started during the backward pass.
  auto comm = std::make_shared<cuda::NcclCommunicator>(gloo(0, 1, dir.file("store")), 1024);
  const RunSummary nccl = run("nccl", comm);
  EXPECT_EQ(comm->last_bucket_count(), 5);
  EXPECT_GT(comm->last_buckets_started_early(), 0);
  EXPECT_EQ(comm->bytes_last_step(), 1091 * 4);
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
  const std::vector<std::string> errors = on_two_ranks([&](int r) {
    cuda::CudaBackend be(r);
    cuda::NcclCommunicator comm(gloo(r, 2, dir.path()));
    comm.attach(be);
    Param p;
    p.grad = be.empty(shape, DType::f32);
    be.copy(r == 0 ? g0 : g1, p.grad);
    comm.all_reduce_gradients({NamedParam{"w", &p}});
    got[static_cast<size_t>(r)] = Tensor::empty(shape, DType::f32);
    be.copy(p.grad, got[static_cast<size_t>(r)]);
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  int64_t wrong = 0;
  for (int64_t i = 0; i < g0.numel(); ++i) {
    const float want = (g0.data<float>()[i] + g1.data<float>()[i]) * 0.5f;  // halving is exact
    wrong += got[0].data<float>()[i] != want || got[1].data<float>()[i] != want;
  }
  EXPECT_EQ(wrong, 0);
}

// ---- overlap: SGD steps with and without the hook

// Holds the stream that runs it for `ms` milliseconds (a host callback; it calls no CUDA function).
void CUDART_CB hold_stream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

/// Three linear layers, 793 k parameters (3.1 MiB of f32): 13 buckets of 256 KiB. The same weights
/// for the same seed.
std::unique_ptr<Model> overlap_mlp(Backend& be) {
  auto m = build_model_from_layers(nlohmann::json::parse(R"([{"type":"flatten"},{"type":"linear","out":512},
      {"type":"relu"},{"type":"linear","out":512},{"type":"relu"},{"type":"linear","out":10}])"),
                                   {1, 32, 32});
  Rng rng(gputest::base_seed() + 702);
  m->create_params(be, DType::f32, rng);
  return m;
}
constexpr int64_t kOverlapBucketBytes = 256 << 10;

/// A batch of 64 random images and labels in [0, 10) on `be`'s device.
std::pair<Tensor, Tensor> random_batch(Backend& be, Rng& rng) {
  const Tensor images = gputest::host_random({64, 1, 32, 32}, rng);
  Tensor labels = Tensor::empty({64}, DType::s32);
  for (int64_t i = 0; i < 64; ++i)
    labels.set_flat(i, static_cast<double>(rng.below(10)));
  std::pair<Tensor, Tensor> out{be.empty(images.shape(), DType::f32), be.empty({64}, DType::s32)};
  be.copy(images, out.first);
  be.copy(labels, out.second);
  return out;
}

/// One SGD step through `comm`: forward, loss, backward (with the overlap hook when `overlap`; the
/// compute stream held `hold_ms` first, so the hook's buckets are enqueued before their gradients
/// are written), the gradient mean, w -= 0.05 g.
void sgd_step(cuda::CudaBackend& be, cuda::NcclCommunicator& comm, Model& m, const std::pair<Tensor, Tensor>& batch,
              bool overlap, int hold_ms) {
  LayerContext lctx{be, true, 0};
  std::vector<NamedParam> params = m.named_params();
  const Tensor& logits = m.forward(lctx, batch.first);
  Tensor diff = be.empty(logits.shape(), logits.dtype());
  be.softmax_cross_entropy(logits, batch.second, &diff, 1.0 / 64);
  if (hold_ms > 0)
    ASSERT_EQ(cudaLaunchHostFunc(be.stream(), hold_stream, reinterpret_cast<void*>(intptr_t{hold_ms})), cudaSuccess);
  if (overlap)
    m.set_grad_ready_hook(comm.grad_ready_hook(params));
  m.backward(lctx, diff);
  m.set_grad_ready_hook({});
  comm.all_reduce_gradients(params);
  for (NamedParam& p : params)
    be.axpy(-0.05, p.param->grad, p.param->value);
}

/// Every parameter's value and gradient, as host bytes, in order.
std::vector<std::vector<char>> host_state(Backend& be, Model& m) {
  std::vector<std::vector<char>> out;
  for (const NamedParam& p : m.named_params())
    for (const Tensor* t : {&p.param->value, &p.param->grad}) {
      Tensor h = Tensor::empty(t->shape(), t->dtype());
      be.copy(*t, h);
      out.emplace_back(static_cast<const char*>(h.raw()), static_cast<const char*>(h.raw()) + h.nbytes());
    }
  return out;
}

TEST_F(CudaNcclCommunicator, OverlappedStepsEqualBlockingStepsBitForBitAndReadTheWrittenGradients) {
  test::TempDir dir;
  cuda::NcclCommunicator comm(gloo(0, 1, dir.path()), kOverlapBucketBytes);
  comm.attach(gpu());
  auto a = overlap_mlp(gpu()), b = overlap_mlp(gpu());
  int64_t grad_bytes = 0;
  for (const NamedParam& p : a->named_params())
    grad_bytes += static_cast<int64_t>(p.param->grad.nbytes());
  // What the communication stream saw: each bucket copied out there right after its all-reduce.
  void* snapshot = nullptr;
  ASSERT_EQ(cudaMalloc(&snapshot, static_cast<size_t>(grad_bytes)), cudaSuccess);
  size_t filled = 0;
  comm.set_bucket_observer([&](cudaStream_t stream, const std::vector<std::pair<void*, size_t>>& spans) {
    for (const auto& span : spans) {
      ASSERT_LE(filled + span.second, static_cast<size_t>(grad_bytes));
      ASSERT_EQ(cudaMemcpyAsync(static_cast<char*>(snapshot) + filled, span.first, span.second,
                                cudaMemcpyDeviceToDevice, stream),
                cudaSuccess);
      filled += span.second;
    }
  });
  Rng rng(gputest::base_seed() + 703);
  for (int step = 0; step < 3; ++step) {
    const auto batch = random_batch(gpu(), rng);
    // Poisoned gradients: the backward pass overwrites every one.
    for (const NamedParam& p : a->named_params()) {
      Tensor nan = Tensor::empty(p.param->grad.shape(), DType::f32);
      nan.fill(std::numeric_limits<double>::quiet_NaN());
      gpu().copy(nan, p.param->grad);
    }
    filled = 0;
    sgd_step(gpu(), comm, *a, batch, /*overlap=*/true, /*hold_ms=*/50);
    if (HasFatalFailure())
      break;
    EXPECT_EQ(comm.last_bucket_count(), 13) << "step " << step;
    EXPECT_GT(comm.last_buckets_started_early(), 0) << "step " << step;
    EXPECT_EQ(comm.bytes_last_step(), grad_bytes) << "step " << step;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(filled, static_cast<size_t>(grad_bytes));
    // One rank's mean is the gradient: the snapshot is the gradients, last parameter first.
    std::vector<char> seen(static_cast<size_t>(grad_bytes)), want;
    ASSERT_EQ(cudaMemcpy(seen.data(), snapshot, seen.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    const auto params = a->named_params();
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      const Tensor g = down(it->param->grad);
      for (int64_t i = 0; i < g.numel(); ++i)
        ASSERT_FALSE(std::isnan(g.data<float>()[i])) << it->name << " left unwritten";
      want.insert(want.end(), static_cast<const char*>(g.raw()), static_cast<const char*>(g.raw()) + g.nbytes());
    }
    EXPECT_TRUE(seen == want) << "step " << step << ": the communication stream read gradients before the "
                              << "backward pass wrote them";
    sgd_step(gpu(), comm, *b, batch, /*overlap=*/false, /*hold_ms=*/0);
    EXPECT_EQ(comm.last_bucket_count(), 0);  // the blocking path: one group on the compute stream
    EXPECT_EQ(comm.bytes_last_step(), grad_bytes);
  }
  EXPECT_TRUE(host_state(gpu(), *a) == host_state(gpu(), *b)) << "overlapped and blocking steps differ";
  comm.set_bucket_observer({});
  cudaFree(snapshot);
}

// dist/comm_s on a GPU: all_reduce_gradients only enqueues, so the host's clock around it reads
// ~0 however long the collectives take. The communication stream is held 80 ms after the step's
// buckets: the device-timed exposed communication of that step (read at the next step) is >= 80 ms,
// while the host returned at once; a step without the hold reads far less.
TEST_F(CudaNcclCommunicator, ExposedCommunicationIsTimedOnTheDeviceNotByTheHostsClock) {
  test::TempDir dir;
  cuda::NcclCommunicator comm(gloo(0, 1, dir.path()), kOverlapBucketBytes);
  comm.attach(gpu());
  EXPECT_LT(comm.exposed_comm_seconds(), 0) << "nothing timed yet: the loop uses its own clock";
  auto m = overlap_mlp(gpu());
  cudaStream_t comm_stream = nullptr;
  comm.set_bucket_observer(
      [&](cudaStream_t stream, const std::vector<std::pair<void*, size_t>>&) { comm_stream = stream; });
  Rng rng(gputest::base_seed() + 704);
  std::vector<double> host_s;
  auto step = [&](int hold_comm_ms) {
    const auto batch = random_batch(gpu(), rng);
    LayerContext lctx{gpu(), true, 0};
    std::vector<NamedParam> params = m->named_params();
    const Tensor& logits = m->forward(lctx, batch.first);
    Tensor diff = gpu().empty(logits.shape(), logits.dtype());
    gpu().softmax_cross_entropy(logits, batch.second, &diff, 1.0 / 64);
    m->set_grad_ready_hook(comm.grad_ready_hook(params));
    m->backward(lctx, diff);
    m->set_grad_ready_hook({});
    if (hold_comm_ms > 0) {
      ASSERT_NE(comm_stream, nullptr) << "no bucket was enqueued during the backward pass";
      ASSERT_EQ(cudaLaunchHostFunc(comm_stream, hold_stream, reinterpret_cast<void*>(intptr_t{hold_comm_ms})),
                cudaSuccess);
    }
    const auto t0 = std::chrono::steady_clock::now();
    comm.all_reduce_gradients(params);
    host_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_EQ(cudaStreamSynchronize(gpu().stream()), cudaSuccess);  // as the next loss read would
  };
  step(0);   // warm-up
  step(80);  // the held step
  ASSERT_FALSE(HasFatalFailure());
  step(0);  // reads the held step's time
  ASSERT_FALSE(HasFatalFailure());
  const double held = comm.exposed_comm_seconds();
  EXPECT_GE(held, 0.080) << "the held communication stream's 80 ms were not seen";
  EXPECT_LT(host_s[1], 0.040) << "all_reduce_gradients waited on the host: the test does not show the point";
  step(0);  // reads the previous, unheld step's time
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_GE(comm.exposed_comm_seconds(), 0.0);
  EXPECT_LT(comm.exposed_comm_seconds(), 0.060) << "an unheld step read as long as the held one";
  comm.set_bucket_observer({});
}

TEST_F(CudaNcclCommunicator, TwoGpuRanksOverlappedStepsEqualBlockingStepsBitForBit) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "one GPU here: two NCCL ranks need two GPUs (NCCL refuses two ranks on one device)";
  test::TempDir dir;
  std::vector<std::vector<std::vector<char>>> overlapped(2), blocking(2);
  std::vector<int> early(2, 0);
  const std::vector<std::string> errors = on_two_ranks([&](int r) {
    cuda::CudaBackend be(r);
    cuda::NcclCommunicator comm(gloo(r, 2, dir.path()), kOverlapBucketBytes);
    comm.attach(be);
    auto a = overlap_mlp(be), b = overlap_mlp(be);
    Rng rng(gputest::base_seed() + 710 + static_cast<uint64_t>(r));  // each rank its own data
    int fewest = std::numeric_limits<int>::max();
    for (int step = 0; step < 3; ++step) {
      const auto batch = random_batch(be, rng);
      sgd_step(be, comm, *a, batch, /*overlap=*/true, /*hold_ms=*/20);
      fewest = std::min(fewest, comm.last_buckets_started_early());
      sgd_step(be, comm, *b, batch, /*overlap=*/false, /*hold_ms=*/0);
    }
    early[static_cast<size_t>(r)] = fewest;
    overlapped[static_cast<size_t>(r)] = host_state(be, *a);
    blocking[static_cast<size_t>(r)] = host_state(be, *b);
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_GT(early[static_cast<size_t>(r)], 0) << "rank " << r;
    EXPECT_TRUE(overlapped[static_cast<size_t>(r)] == blocking[static_cast<size_t>(r)]) << "rank " << r;
  }
  // The same averaged gradients on both ranks: the same weights.
  EXPECT_TRUE(overlapped[0] == overlapped[1]);
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
