// GlooCommunicator's speed and memory features across 2-3 forked ranks: overlap (bit-identical to
// the blocking path, buckets started before all_reduce_gradients), fp16/bf16 buckets (within 1e-2,
// bytes exactly half, through shared memory and tcp, which agree bit for bit on 2 ranks), ZeRO-1
// (ShardedOptimizer on 2 and 3 ranks equals the unsharded run; each rank holds 1/N of the state
// within one alignment unit; the shards gathered for a checkpoint equal the unsharded state, and
// whole state tensors load back into the slices; FlatPartition's cuts), and a device tensor refused.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/core/error.h"
#include "engine/dist/gloo_communicator.h"
#include "engine/dist/sharded_optimizer.h"
#include "engine/nn/zoo.h"
#include "tests/support/multi_process.h"
#include "tests/support/random_tensor.h"

using lathe::NamedParam;
using lathe::Param;
using lathe::Tensor;
using lathe::dist::GlooCommunicator;
using lathe::dist::GlooOptions;
using lathe::test::require;
using lathe::test::run_processes;

namespace {

const std::vector<lathe::Shape> kSpeedShapes = {{3, 4}, {5}, {2, 3, 2, 2}, {1}, {6, 5}};  // 72 elements

double speed_grad(int r, int k, int64_t i) { return std::sin(0.37 * r + 1.3 * k + 0.11 * i) * 3.7; }

struct SpeedParams {
  std::vector<Param> storage;
  std::vector<NamedParam> named;
  explicit SpeedParams(int rank, int step = 0, const std::vector<lathe::Shape>& shapes = kSpeedShapes) {
    storage.reserve(shapes.size());
    for (size_t k = 0; k < shapes.size(); ++k) {
      Param p{"w", Tensor::zeros(shapes[k], lathe::DType::f32), Tensor::zeros(shapes[k], lathe::DType::f32)};
      for (int64_t i = 0; i < p.value.numel(); ++i)
        p.value.set_flat(i, std::cos(0.5 * k + 0.07 * i));
      storage.push_back(std::move(p));
    }
    for (size_t k = 0; k < storage.size(); ++k)
      named.push_back({std::to_string(k) + ".w", &storage[k]});
    fill_grads(rank, step);
  }
  void fill_grads(int rank, int step) {
    for (size_t k = 0; k < storage.size(); ++k)
      for (int64_t i = 0; i < storage[k].grad.numel(); ++i)
        storage[k].grad.set_flat(i, speed_grad(rank + step, static_cast<int>(k), i));
  }
  int64_t elements() const {
    int64_t n = 0;
    for (const auto& p : storage)
      n += p.grad.numel();
    return n;
  }
};

class GlooSpeedTest : public ::testing::Test {
 protected:
  void SetUp() override { m_folder = lathe::test::fresh_temp_folder("dist-speed"); }
  void TearDown() override {
    EXPECT_TRUE(lathe::test::no_children_left());
    std::filesystem::remove_all(m_folder);
  }
  GlooOptions options(const std::string& run, double bucket_mb = 25,
                      GlooOptions::Compression c = GlooOptions::Compression::none) const {
    GlooOptions o;
    o.rendezvous = m_folder.string();
    o.run_id = run;
    o.bucket_mb = bucket_mb;
    o.timeout_s = 20;
    o.compression = c;
    return o;
  }
  static void expect_all_ok(const std::vector<lathe::test::ChildResult>& results) {
    for (const auto& r : results)
      EXPECT_TRUE(r.exited_ok) << "rank " << r.index << ": " << r.message;
  }
  std::filesystem::path m_folder;
};

const double kSmallBucket = 16.0 / (1024 * 1024);  // 4 floats: 18 buckets for 72 elements

TEST_F(GlooSpeedTest, OverlapIsBitIdenticalAndStartsBucketsEarly) {
  const int world = 3;
  auto blocking_opts = options("blocking", kSmallBucket);
  auto overlap_opts = options("overlap", kSmallBucket);
  auto results = run_processes(
      world,
      [&](int r) {
        GlooCommunicator blocking(r, world, blocking_opts);
        GlooCommunicator overlap(r, world, overlap_opts);
        for (int step = 0; step < 3; ++step) {  // the plan is reused across steps
          SpeedParams a(r, step), b(r, step);
          blocking.all_reduce_gradients(a.named);
          auto hook = overlap.grad_ready_hook(b.named);
          // "Backward": every parameter but the first is ready, in reverse order; the rest of the
          // backward pass takes a while, during which the thread must already be sending.
          for (size_t k = b.named.size(); k-- > 1;)
            hook(b.named[k].param);
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          overlap.all_reduce_gradients(b.named);
          require(overlap.last_bucket_count() == blocking.last_bucket_count(), "bucket counts differ");
          require(overlap.last_buckets_started_early() >= 1,
                  "no bucket started early: " + std::to_string(overlap.last_buckets_started_early()));
          require(overlap.bytes_last_step() == a.elements() * 4, "overlap bytes");
          for (size_t k = 0; k < a.storage.size(); ++k)
            for (int64_t i = 0; i < a.storage[k].grad.numel(); ++i)
              require(a.storage[k].grad.at_flat(i) == b.storage[k].grad.at_flat(i),
                      "param " + std::to_string(k) + "[" + std::to_string(i) + "] differs");
        }
      },
      60);
  expect_all_ok(results);
}

// Through shared memory (the default on one machine) and over tcp.
TEST_F(GlooSpeedTest, SixteenBitBucketsAreCloseAndHalfTheBytes) {
  const int world = 3;
  for (bool shm : {true, false})
    for (auto c : {GlooOptions::Compression::fp16, GlooOptions::Compression::bf16}) {
      const std::string tag =
          std::string(c == GlooOptions::Compression::fp16 ? "fp16" : "bf16") + (shm ? "-shm" : "-tcp");
      auto ref_opts = options("ref" + tag, kSmallBucket);
      auto opts = options(tag, kSmallBucket, c);
      opts.shared_memory = shm;
      auto results = run_processes(
          world,
          [&](int r) {
            GlooCommunicator ref(r, world, ref_opts);
            GlooCommunicator comp(r, world, opts);
            require(comp.uses_shared_memory() == shm, tag + ": uses_shared_memory() is not " + std::to_string(shm));
            SpeedParams a(r), b(r);
            ref.all_reduce_gradients(a.named);
            comp.all_reduce_gradients(b.named);
            require(comp.bytes_last_step() * 2 == ref.bytes_last_step(),
                    tag + " bytes " + std::to_string(comp.bytes_last_step()) + " vs " +
                        std::to_string(ref.bytes_last_step()));
            // Relative to the f32 result as a vector (elements near 0 lose digits to cancellation).
            double diff2 = 0, norm2 = 0, worst = 0;
            for (size_t k = 0; k < a.storage.size(); ++k)
              for (int64_t i = 0; i < a.storage[k].grad.numel(); ++i) {
                const double x = a.storage[k].grad.at_flat(i), y = b.storage[k].grad.at_flat(i);
                diff2 += (x - y) * (x - y);
                norm2 += x * x;
                worst = std::max(worst, std::abs(x - y));
              }
            const double rel = std::sqrt(diff2 / norm2);
            require(rel <= 1e-2, tag + " relative error " + std::to_string(rel));
            require(worst > 0, tag + " is exactly f32: nothing was compressed");
          },
          60);
      expect_all_ok(results);
    }
}

// On 2 ranks the segment's rule (round each value, sum, divide, round the mean) and tcp's (round the
// sum, divide in f32) give the same bits while the sum and the mean stay in the format's normal range
// (a division by 2 commutes with rounding there); the values here are positive, 0.5 to 60 (fp16's
// normal range starts at 2^-14, its largest value is 65504).
TEST_F(GlooSpeedTest, OnTwoRanksSixteenBitBucketsThroughSharedMemoryAndTcpAgreeBitForBit) {
  const int world = 2;
  for (auto c : {GlooOptions::Compression::fp16, GlooOptions::Compression::bf16}) {
    const std::string tag = c == GlooOptions::Compression::fp16 ? "fp16" : "bf16";
    auto shm_opts = options("agree-shm" + tag, kSmallBucket, c), tcp_opts = options("agree-tcp" + tag, kSmallBucket, c);
    tcp_opts.shared_memory = false;
    auto results = run_processes(
        world,
        [&](int r) {
          GlooCommunicator shm(r, world, shm_opts), tcp(r, world, tcp_opts);
          require(shm.uses_shared_memory() && !tcp.uses_shared_memory(), tag + ": transports");
          SpeedParams a(r), b(r);
          for (SpeedParams* p : {&a, &b})
            for (auto& param : p->storage)
              for (int64_t i = 0; i < param.grad.numel(); ++i)
                param.grad.data<float>()[i] = 0.5f + 59.5f * std::abs(param.grad.data<float>()[i]) / 3.7f;
          shm.all_reduce_gradients(a.named);
          tcp.all_reduce_gradients(b.named);
          for (size_t k = 0; k < a.storage.size(); ++k)
            require(std::memcmp(a.storage[k].grad.raw(), b.storage[k].grad.raw(), a.storage[k].grad.nbytes()) == 0,
                    tag + ": param " + std::to_string(k) + " differs between shared memory and tcp");
        },
        60);
    expect_all_ok(results);
  }
}

TEST_F(GlooSpeedTest, ShardedOptimizerEqualsTheUnshardedRunWithOneNthOfTheState) {
  // As the cnn: one weight holds most of the elements, so a whole-tensor partition could not be even.
  const std::vector<lathe::Shape> shapes = {{8, 1, 3, 3}, {8}, {400, 30}, {30}, {10, 30}, {10}};  // 12,460
  const int steps = 5;
  for (const int world : {2, 3})
    for (const std::string kind : {"sgd", "adamw"}) {
      const std::string tag = kind + " on " + std::to_string(world) + " ranks";
      auto plain_opts = options("plain" + kind + std::to_string(world));
      auto shard_opts = options("shard" + kind + std::to_string(world));
      auto results = run_processes(
          world,
          [&](int r) {
            lathe::DnnlBackend be;
            auto make = [&]() -> std::shared_ptr<lathe::Optimizer> {
              if (kind == "sgd")
                return std::make_shared<lathe::Sgd>(0.9, 1e-4, false);
              return std::make_shared<lathe::AdamW>(0.9, 0.999, 1e-8, 0.01);
            };
            auto plain_comm = std::make_shared<GlooCommunicator>(r, world, plain_opts);
            auto shard_comm = std::make_shared<GlooCommunicator>(r, world, shard_opts);
            auto plain = make();
            lathe::ShardedOptimizer sharded(make(), shard_comm);
            SpeedParams a(r, 0, shapes), b(r, 0, shapes);
            auto compare = [&](const SpeedParams& x, const SpeedParams& y, const std::string& what) {
              for (size_t k = 0; k < x.storage.size(); ++k)
                for (int64_t i = 0; i < x.storage[k].value.numel(); ++i) {
                  const double u = x.storage[k].value.at_flat(i), v = y.storage[k].value.at_flat(i);
                  require(std::abs(u - v) <= 1e-6 * std::max(1.0, std::abs(u)),
                          tag + " " + what + " param " + std::to_string(k) + "[" + std::to_string(i) +
                              "]: " + std::to_string(u) + " vs " + std::to_string(v));
                }
            };
            // Step s of both runs: the plain optimizer on `a`, the sharded one `o` on `y`.
            auto step_both = [&](int s, SpeedParams& y, lathe::ShardedOptimizer& o) {
              a.fill_grads(r, s);
              y.fill_grads(r, s);
              plain_comm->all_reduce_gradients(a.named);
              plain->step(be, a.named, 0.05);
              shard_comm->all_reduce_gradients(y.named);
              o.step(be, y.named, 0.05);
            };
            for (int s = 0; s < steps; ++s)
              step_both(s, b, sharded);
            require(sharded.steps_taken() == steps, "steps_taken");
            compare(a, b, "after " + std::to_string(steps) + " steps");
            // 1/N of the state on every rank (within one alignment unit), N shares adding up to all.
            const int64_t per_kind = kind == "sgd" ? 1 : 2;
            const int64_t total = lathe::optimizer_state_bytes(*plain, a.named);
            const int64_t mine = lathe::optimizer_state_bytes(sharded, b.named);
            require(total == a.elements() * 4 * per_kind, tag + " total state " + std::to_string(total));
            const int64_t unit = lathe::kShardAlign * 4 * per_kind;
            require(std::abs(mine * world - total) <= unit * world,
                    tag + " rank " + std::to_string(r) + " holds " + std::to_string(mine) + " B of " +
                        std::to_string(total) + " B: not 1/" + std::to_string(world) + " within " +
                        std::to_string(unit) + " B");
            double sum = static_cast<double>(mine);
            shard_comm->all_reduce_sum(&sum, 1);
            require(sum == static_cast<double>(total), tag + " shares add up to " + std::to_string(sum));
            // A checkpoint's view: the shards gathered on every rank equal the unsharded state.
            const auto want = plain->state_tensors(be, a.named);
            const auto got = sharded.gathered_state_tensors(be, b.named);
            require(
                got.size() == want.size() && got.size() == a.storage.size() * per_kind,
                tag + " gathered " + std::to_string(got.size()) + " state tensors of " + std::to_string(want.size()));
            std::map<std::string, Tensor> whole;
            for (size_t k = 0; k < got.size(); ++k) {
              require(got[k].first == want[k].first && got[k].second.shape() == want[k].second.shape(),
                      tag + " state " + got[k].first + " vs " + want[k].first);
              for (int64_t i = 0; i < got[k].second.numel(); ++i) {
                const double x = want[k].second.at_flat(i), y = got[k].second.at_flat(i);
                require(std::abs(x - y) <= 1e-6 * std::max(1.0, std::abs(x)), tag + " " + got[k].first + " differs");
              }
              whole.emplace(want[k].first, want[k].second);
            }
            // Resume: the whole tensors an unsharded run wrote (the format of every checkpoint,
            // the whole-tensor ZeRO-1 layout's too) restore each rank's slices, and the next step
            // equals the unsharded optimizer's.
            lathe::ShardedOptimizer resumed(make(), shard_comm);
            SpeedParams& c = b;
            resumed.load_full_state(be, c.named, whole, plain->steps_taken());
            require(lathe::optimizer_state_bytes(resumed, c.named) == mine, tag + " resumed state size");
            step_both(steps, c, resumed);
            compare(a, c, "after a resumed step");
            // Bad state is refused, naming the tensor.
            auto refused = [&](std::map<std::string, Tensor> bad, const std::string& needle) {
              lathe::ShardedOptimizer o(make(), shard_comm);
              try {
                o.load_full_state(be, c.named, bad, 1);
              } catch (const lathe::DataError& e) {
                require(std::string(e.what()).find(needle) != std::string::npos,
                        tag + ": the message '" + e.what() + "' lacks " + needle);
                return;
              }
              throw std::runtime_error(tag + ": bad state " + needle + " was accepted");
            };
            std::map<std::string, Tensor> wrong_shape = whole;
            wrong_shape.begin()->second = Tensor::zeros({3}, lathe::DType::f32);
            refused(wrong_shape, "'" + whole.begin()->first + "' is [3]");
            std::map<std::string, Tensor> stranger = whole;
            stranger.emplace("9.w.momentum_buffer", Tensor::zeros({3}, lathe::DType::f32));
            refused(stranger, "'9.w.momentum_buffer' belongs to no parameter");
            if (kind == "adamw") {
              std::map<std::string, Tensor> half = whole;
              half.erase("2.w.exp_avg_sq");
              refused(half, "'2.w.exp_avg_sq' is missing");
            }
          },
          60);
      expect_all_ok(results);
    }
}

TEST(FlatPartition, CutsTheFlatSpaceIntoEvenRangesAtAlignedOffsets) {
  // Whole tensors cannot be split evenly here (one is 95% of the elements); the flat ranges can.
  const std::vector<int64_t> numels = {72, 8, 401408, 512, 5120, 10};  // 407,130
  for (const int world : {1, 2, 3, 4, 7}) {
    const lathe::FlatPartition p = lathe::FlatPartition::make(numels, world);
    ASSERT_EQ(p.bounds.size(), static_cast<size_t>(world) + 1);
    EXPECT_EQ(p.bounds.front(), 0);
    EXPECT_EQ(p.bounds.back(), 407130);
    for (int r = 0; r < world; ++r)
      EXPECT_LE(std::abs(p.owned(r) * world - 407130), lathe::kShardAlign * world) << world << " ranks, rank " << r;
    // The slices tile every tensor in order; each inner cut is aligned from its tensor's start.
    std::vector<int64_t> next(numels.size(), 0);
    int last_rank = 0;
    for (const auto& s : p.slices) {
      ASSERT_LT(s.index, numels.size());
      EXPECT_EQ(s.begin, next[s.index]) << "tensor " << s.index;
      EXPECT_LT(s.begin, s.end);
      EXPECT_TRUE(s.begin % lathe::kShardAlign == 0) << s.begin;
      EXPECT_TRUE(s.end == numels[s.index] || s.end % lathe::kShardAlign == 0) << s.end;
      EXPECT_GE(s.rank, last_rank);
      last_rank = s.rank;
      next[s.index] = s.end;
    }
    EXPECT_EQ(next, numels) << world << " ranks";
  }
  // Two ranks: the big weight is cut near its middle, at a multiple of 16.
  const lathe::FlatPartition two = lathe::FlatPartition::make(numels, 2);
  ASSERT_EQ(two.slices.size(), 7u);
  EXPECT_EQ(two.slices[2].index, 2u);
  EXPECT_EQ(two.slices[2].rank, 0);
  EXPECT_EQ(two.slices[2].end, 203488);  // 407130 / 2 = 203565 = 80 + 203485 -> 203488
  EXPECT_EQ(two.slices[3].rank, 1);
  EXPECT_EQ(two.slices[3].begin, 203488);
  // A cut that lands on a tensor's start stays there; more ranks than elements leave some empty.
  const lathe::FlatPartition even = lathe::FlatPartition::make({100, 10, 60, 40, 5, 5}, 2);
  EXPECT_EQ(even.bounds, (std::vector<int64_t>{0, 110, 220}));
  const lathe::FlatPartition tiny = lathe::FlatPartition::make({5}, 4);
  EXPECT_EQ(tiny.bounds, (std::vector<int64_t>{0, 0, 0, 0, 5}));
  ASSERT_EQ(tiny.slices.size(), 1u);
  EXPECT_EQ(tiny.slices[0].rank, 3);
}

// Host memory labelled as a CUDA device, so that a "device tensor" exists without a GPU.
class FakeDeviceAllocator final : public lathe::Allocator {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); }
  void deallocate(void* ptr, size_t) noexcept override { std::free(ptr); }
  lathe::Device device() const override { return lathe::Device::cuda(7); }
};

TEST_F(GlooSpeedTest, ADeviceTensorIsRefused) {
  static FakeDeviceAllocator fake;
  lathe::register_allocator(lathe::Device::cuda(7), &fake);
  auto opts = options("device");
  auto results = run_processes(
      2,
      [&](int r) {
        GlooCommunicator comm(r, 2, opts);
        Param p{"w", Tensor::zeros({4}, lathe::DType::f32),
                Tensor::empty({4}, lathe::DType::f32, lathe::Device::cuda(7))};
        std::vector<NamedParam> named = {{"0.w", &p}};
        try {
          comm.all_reduce_gradients(named);
        } catch (const lathe::Error& e) {
          require(std::string(e.what()).find("the gradient of 0.w is on cuda") != std::string::npos, e.what());
          return;
        }
        throw std::runtime_error("no error for a device gradient");
      },
      30);
  expect_all_ok(results);
}

TEST_F(GlooSpeedTest, OverlapDuringARealBackwardPassMatchesTheBlockingPath) {
  // The zoo mlp's backward pass calls the hook; small buckets so that several go out during it.
  const int world = 2;
  auto blocking_opts = options("mlp-blocking", 0.05);
  auto overlap_opts = options("mlp-overlap", 0.05);
  auto results = run_processes(
      world,
      [&](int r) {
        lathe::DnnlBackend be;
        GlooCommunicator blocking(r, world, blocking_opts);
        GlooCommunicator overlap(r, world, overlap_opts);
        auto model = lathe::build_zoo_model("mlp");
        lathe::Rng rng(11);
        model->create_params(be, lathe::DType::f32, rng);
        lathe::Rng data_rng(100 + r);  // each rank its own batch
        Tensor x = lathe::test::random_tensor({8, 784}, data_rng);
        lathe::LayerContext ctx{be, true, 0};
        const Tensor& out = model->forward(ctx, x);
        Tensor diff = lathe::test::random_tensor(out.shape(), data_rng);
        auto params = model->named_params();
        model->backward(ctx, diff);
        std::vector<Tensor> expected;
        for (auto& p : params) {
          expected.push_back(Tensor::zeros(p.param->grad.shape(), lathe::DType::f32));
          be.copy(p.param->grad, expected.back());
        }
        std::vector<lathe::NamedParam> copies;  // the blocking path on copies of the same gradients
        std::vector<Param> store;
        store.reserve(params.size());
        for (size_t k = 0; k < params.size(); ++k) {
          store.push_back({"w", Tensor::zeros(params[k].param->value.shape(), lathe::DType::f32), expected[k]});
          copies.push_back({params[k].name, &store.back()});
        }
        blocking.all_reduce_gradients(copies);
        model->set_grad_ready_hook(overlap.grad_ready_hook(params));
        model->backward(ctx, diff);  // the same gradients again, now sent while computed
        model->set_grad_ready_hook({});
        overlap.all_reduce_gradients(params);
        require(overlap.last_bucket_count() > 2, "buckets " + std::to_string(overlap.last_bucket_count()));
        // (Whether a bucket went out before backward ended depends on scheduling here; the
        // sleep-paced test above checks that deterministically.)
        for (size_t k = 0; k < params.size(); ++k)
          for (int64_t i = 0; i < expected[k].numel(); ++i)
            require(params[k].param->grad.at_flat(i) == store[k].grad.at_flat(i),
                    params[k].name + "[" + std::to_string(i) + "] differs from the blocking path");
      },
      60);
  expect_all_ok(results);
}

}  // namespace
