// GlooCommunicator across 2 and 3 forked processes meeting in a FileStore folder: the gradient mean
// (buckets smaller than one parameter and larger than all; f32, and fp16/bf16 through shared
// memory), broadcast, sums, barrier, two runs in one folder, the error for a rank that never joins,
// and no process left behind. The gradient arena: planned gradients moved into shared memory and
// averaged there, a gradient replaced after the plan still averaged (copied in and back).
#include "engine/dist/gloo_communicator.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/dist/shm_allreduce.h"
#include "tests/support/multi_process.h"

using lathe::NamedParam;
using lathe::Param;
using lathe::Tensor;
using lathe::dist::GlooCommunicator;
using lathe::dist::GlooOptions;
using lathe::test::require;
using lathe::test::run_processes;

namespace {

const std::vector<lathe::Shape> kShapes = {{3, 4}, {5}, {2, 3, 2, 2}, {1}};  // 42 elements

// A model's parameters, each value and gradient filled by f(rank, param, element).
struct Params {
  std::vector<Param> storage;
  std::vector<NamedParam> named;
  Params(int rank, const std::function<double(int, int, int64_t)>& f) {
    storage.reserve(kShapes.size());
    for (size_t k = 0; k < kShapes.size(); ++k) {
      Param p{"w", Tensor::zeros(kShapes[k], lathe::DType::f32), Tensor::zeros(kShapes[k], lathe::DType::f32)};
      for (int64_t i = 0; i < p.value.numel(); ++i) {
        p.grad.set_flat(i, f(rank, static_cast<int>(k), i));
        p.value.set_flat(i, f(rank, static_cast<int>(k), i) + 1000);
      }
      storage.push_back(std::move(p));
    }
    for (size_t k = 0; k < storage.size(); ++k)
      named.push_back({std::to_string(k) + ".w", &storage[k]});
  }
};

// 1-D parameters of the given sizes (pieces that cross shared-memory chunks), zeroed.
struct FlatParams {
  std::vector<Param> storage;
  std::vector<NamedParam> named;
  explicit FlatParams(const std::vector<int64_t>& sizes) {
    storage.reserve(sizes.size());
    for (int64_t n : sizes)
      storage.push_back({"w", Tensor::zeros({n}, lathe::DType::f32), Tensor::zeros({n}, lathe::DType::f32)});
    for (size_t k = 0; k < storage.size(); ++k)
      named.push_back({std::to_string(k) + ".w", &storage[k]});
  }
  /// Sets gradient k's element i to f(k, i) and averages the gradients over the ranks: blocking, or
  /// with the overlap hook told of each gradient in reverse order first, as the backward pass does.
  template <class F>
  void average_gradients(GlooCommunicator& comm, bool overlap, F f) {
    for (size_t k = 0; k < storage.size(); ++k)
      for (int64_t i = 0; i < storage[k].grad.numel(); ++i)
        storage[k].grad.data<float>()[i] = f(k, i);
    if (overlap) {
      auto hook = comm.grad_ready_hook(named);
      for (size_t k = named.size(); k-- > 0;)
        hook(named[k].param);
    }
    comm.all_reduce_gradients(named);
  }
};

double integer_valued(int r, int k, int64_t i) { return (r + 1) * (k + 3) + (i % 7) - 3 * r; }
double fractional(int r, int k, int64_t i) { return std::sin(0.37 * r + 1.3 * k + 0.11 * i) * 3.7; }

class GlooCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override { m_folder = lathe::test::fresh_temp_folder("dist"); }
  void TearDown() override {
    EXPECT_TRUE(lathe::test::no_children_left());
    std::filesystem::remove_all(m_folder);
  }
  GlooOptions options(const std::string& run, double bucket_mb = 25, double timeout_s = 20) const {
    GlooOptions o;
    o.rendezvous = m_folder.string();
    o.run_id = run;
    o.bucket_mb = bucket_mb;
    o.timeout_s = timeout_s;
    return o;
  }
  static void expect_all_ok(const std::vector<lathe::test::ChildResult>& results) {
    for (const auto& r : results)
      EXPECT_TRUE(r.exited_ok) << "rank " << r.index << ": " << r.message;
  }
  std::filesystem::path m_folder;
};

// Every rank's gradients become the mean over ranks, computed here from the same formula.
void check_mean(int rank, int world, const GlooOptions& opts, const std::function<double(int, int, int64_t)>& f,
                double tolerance, int expected_buckets) {
  GlooCommunicator comm(rank, world, opts);
  Params params(rank, f);
  comm.all_reduce_gradients(params.named);
  require(comm.last_bucket_count() == expected_buckets,
          "buckets " + std::to_string(comm.last_bucket_count()) + " != " + std::to_string(expected_buckets));
  for (size_t k = 0; k < params.storage.size(); ++k) {
    const Tensor& g = params.storage[k].grad;
    for (int64_t i = 0; i < g.numel(); ++i) {
      float sum = 0;
      for (int r = 0; r < world; ++r)
        sum += static_cast<float>(f(r, static_cast<int>(k), i));
      const double expected = sum / static_cast<float>(world);
      const double got = g.at_flat(i);
      require(std::abs(got - expected) <= tolerance, "param " + std::to_string(k) + "[" + std::to_string(i) + "]: " +
                                                         std::to_string(got) + " != " + std::to_string(expected));
    }
  }
}

TEST_F(GlooCommunicatorTest, OneRankIsANoOp) {
  GlooCommunicator comm(0, 1, options("solo"));
  Params params(0, integer_valued);
  comm.all_reduce_gradients(params.named);
  comm.barrier();
  double v[2] = {1.5, 2};
  comm.all_reduce_sum(v, 2);
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(params.storage[0].grad.at_flat(1), integer_valued(0, 0, 1));
}

TEST_F(GlooCommunicatorTest, GradientMeanExactInOneBucketTwoAndThreeRanks) {
  for (int world : {2, 3}) {
    auto opts = options("mean" + std::to_string(world));
    auto results = run_processes(
        world, [&](int r) { check_mean(r, world, opts, integer_valued, 0.0, 1); }, 30);
    expect_all_ok(results);
  }
}

// Ranks on one machine sum through shared memory unless told not to; both transports give the exact
// mean of integer-valued gradients, and a bucket larger than a shared-memory chunk
// (GlooCommunicator::kSharedMemoryChunk floats) goes through in several chunks.
TEST_F(GlooCommunicatorTest, SharedMemoryAndTcpBothGiveTheExactMean) {
  // Run ids of this test alone (segment names are /lathe-<run id>-<pid>): other tests that ctest
  // runs beside it may hold segments of their own in /dev/shm at the end.
  const std::string tag = "exact-mean-" + std::to_string(getpid()) + "-";
  for (bool shm : {true, false}) {
    auto opts = options(tag + (shm ? "shm" : "tcp")), probe_opts = options(tag + (shm ? "shm-probe" : "tcp-probe"));
    opts.shared_memory = probe_opts.shared_memory = shm;
    auto results = run_processes(
        3,
        [&](int r) {
          {
            GlooCommunicator probe(r, 3, probe_opts);
            require(probe.uses_shared_memory() == shm, "uses_shared_memory() is not " + std::to_string(shm));
          }
          check_mean(r, 3, opts, integer_valued, 0.0, 1);
        },
        60);
    expect_all_ok(results);
  }
  auto big = options(tag + "big");
  auto results = run_processes(
      2,
      [&](int r) {
        GlooCommunicator comm(r, 2, big);
        require(comm.uses_shared_memory(), "2 ranks here should share memory");
        const int64_t n = GlooCommunicator::kSharedMemoryChunk * 5 / 2;  // 2.5 chunks
        Param p{"w", Tensor::zeros({n}, lathe::DType::f32), Tensor::zeros({n}, lathe::DType::f32)};
        for (int64_t i = 0; i < n; ++i)
          p.grad.data<float>()[i] = static_cast<float>((i % 1001) * (r + 1));
        comm.all_reduce_gradients({NamedParam{"w", &p}});
        for (int64_t i = 0; i < n; ++i)
          if (p.grad.data<float>()[i] != static_cast<float>(i % 1001) * 1.5f)
            require(false, "element " + std::to_string(i) + " = " + std::to_string(p.grad.data<float>()[i]));
      },
      60);
  expect_all_ok(results);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_EQ(e.path().filename().string().rfind("lathe-" + tag, 0), std::string::npos) << e.path() << " left behind";
}

namespace {

// Whether [p, p + bytes) lies in one of this process's mappings of a /dev/shm file whose name starts
// with `prefix` (/proc/self/maps; an unlinked one reads "/dev/shm/<name> (deleted)").
bool in_shared_memory(const void* p, size_t bytes, const std::string& prefix) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    if (line.find("/dev/shm/" + prefix) == std::string::npos)
      continue;
    const uintptr_t lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    const uintptr_t hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    if (lo <= at && at + bytes <= hi)
      return true;
  }
  return false;
}

}  // namespace

// f32 through shared memory, the overlap plan moves every gradient into the gradient arena (the
// backward pass writes them there and the all-reduce averages them in place): each one then lies in
// the segment's mapping, keeps its values, and ends as the rank-order mean. A gradient replaced by
// a fresh tensor after the plan is copied to its place and back: still the exact mean, in the
// replacement. 16-bit buckets keep the slots (no arena). No segment is left in /dev/shm.
TEST_F(GlooCommunicatorTest, PlannedGradientsLiveInTheSharedArenaAndAReplacedOneIsStillAveraged) {
  const std::string tag = "arena-" + std::to_string(getpid()) + "-";
  auto opts = options(tag + "f32"), fp16_opts = options(tag + "fp16");
  fp16_opts.compression = GlooOptions::Compression::fp16;
  const std::vector<int64_t> sizes = {GlooCommunicator::kSharedMemoryChunk + 17, 3, 1000};
  auto value = [](int r, size_t k, int64_t i, int round) {
    return static_cast<float>(std::sin(0.37 * r + 1.3 * static_cast<double>(k) + 0.011 * static_cast<double>(i)) * 3.7 *
                              (round + 1));
  };
  auto results = run_processes(
      2,
      [&](int r) {
        GlooCommunicator comm(r, 2, opts);
        FlatParams params(sizes);
        std::vector<Param>& storage = params.storage;
        auto check = [&](int round, const std::string& what) {
          for (size_t k = 0; k < storage.size(); ++k)
            for (int64_t i = 0; i < sizes[k]; ++i)
              if (storage[k].grad.data<float>()[i] != (value(0, k, i, round) + value(1, k, i, round)) / 2.0f)
                require(false, what + ": param " + std::to_string(k) + "[" + std::to_string(i) +
                                   "] is not the rank-order mean");
        };
        // The plan keeps the values it finds (set, then planned, then reduced, as average_gradients does).
        params.average_gradients(comm, true, [&](size_t k, int64_t i) { return value(r, k, i, 0); });
        require(comm.uses_gradient_arena(), "2 ranks sharing memory in f32 should use the gradient arena");
        for (const Param& p : storage)
          require(in_shared_memory(p.grad.raw(), p.grad.nbytes(), "lathe-" + tag + "f32"),
                  "a planned gradient is not in the shared-memory segment");
        check(0, "in the arena");
        params.average_gradients(comm, true, [&](size_t k, int64_t i) { return value(r, k, i, 1); });
        check(1, "in the arena, the plan reused");
        storage[1].grad = Tensor::zeros({sizes[1]}, lathe::DType::f32);  // swapped out behind the plan's back
        const void* replacement = storage[1].grad.raw();
        params.average_gradients(comm, false, [&](size_t k, int64_t i) { return value(r, k, i, 2); });
        require(storage[1].grad.raw() == replacement, "the replacement gradient was swapped for another");
        require(!in_shared_memory(replacement, 12, "lathe-" + tag), "the replacement is in shared memory");
        check(2, "a gradient replaced after the plan");
        GlooCommunicator fp16(r, 2, fp16_opts);
        FlatParams other(sizes);
        other.average_gradients(fp16, true, [&](size_t k, int64_t i) { return value(r, k, i, 0); });
        require(fp16.uses_shared_memory() && !fp16.uses_gradient_arena(), "fp16 buckets should keep the slots");
      },
      60);
  expect_all_ok(results);
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_EQ(e.path().filename().string().rfind("lathe-" + tag, 0), std::string::npos) << e.path() << " left behind";
}

// all_reduce_gradients_and_sum (the training loop's step: gradients and its stop vote) equals the
// two calls: every gradient the mean, every value the sum over the ranks, whether the values ride on
// the gradient arena's last bucket (one bucket or several, planned or blocking) or follow (the slots
// before any plan, tcp), and more values than ride (kSmallValues) still summed. Plain sums in between and after keep
// working (the values share all_reduce_sum's small areas). Integer data: every order sums exactly.
TEST_F(GlooCommunicatorTest, GradientsAndSumsInOneCallEqualTheTwoCalls) {
  const std::vector<int64_t> sizes = {GlooCommunicator::kSharedMemoryChunk + 17, 3, 1000};
  struct Case {
    std::string name;
    bool shm;
    double bucket_mb;
  };
  const std::vector<Case> cases = {{"ride-one-bucket", true, 25}, {"ride-buckets", true, 0.1}, {"tcp", false, 25}};
  for (const Case& c : cases) {
    auto opts = options(c.name, c.bucket_mb);
    opts.shared_memory = c.shm;
    auto results = run_processes(
        3,
        [&](int r) {
          GlooCommunicator comm(r, 3, opts);
          FlatParams params(sizes);
          for (int round = 0; round < 4; ++round) {
            const bool overlap = round % 2 == 1;
            for (size_t k = 0; k < params.storage.size(); ++k)
              for (int64_t i = 0; i < sizes[k]; ++i)
                params.storage[k].grad.data<float>()[i] = static_cast<float>((r + 1) * (i % 7) + round - 3 * static_cast<int64_t>(k));
            if (overlap) {
              auto hook = comm.grad_ready_hook(params.named);
              for (size_t k = params.named.size(); k-- > 0;)
                hook(params.named[k].param);
            }
            const int64_t n = round == 3 ? lathe::dist::ShmAllReduce::kSmallValues + 8 : 3;
            std::vector<double> v(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i)
              v[static_cast<size_t>(i)] = 1000.0 * r + static_cast<double>(i) + round;
            comm.all_reduce_gradients_and_sum(params.named, v.data(), n);
            if (c.shm && round == 1)  // planned by the first overlapped round's hook
              require(comm.uses_gradient_arena(), c.name + ": f32 ranks sharing memory should use the arena");
            for (size_t k = 0; k < params.storage.size(); ++k)
              for (int64_t i = 0; i < sizes[k]; ++i) {
                const float sum = static_cast<float>(6 * (i % 7) + 3 * (round - 3 * static_cast<int64_t>(k)));
                if (params.storage[k].grad.data<float>()[i] != sum / 3.0f)
                  require(false, c.name + " round " + std::to_string(round) + ": param " + std::to_string(k) + "[" +
                                     std::to_string(i) + "] is not the mean");
              }
            for (int64_t i = 0; i < n; ++i)
              require(v[static_cast<size_t>(i)] == 3000.0 + 3.0 * static_cast<double>(i + round),
                      c.name + " round " + std::to_string(round) + ": value " + std::to_string(i) + " is not the sum");
            double plain[2] = {static_cast<double>(r), 1.0};
            comm.all_reduce_sum(plain, 2);
            require(plain[0] == 3.0 && plain[1] == 3.0, c.name + ": a plain sum after the call is wrong");
          }
        },
        60);
    expect_all_ok(results);
  }
}

// A rank that leaves before the gradient all-reduce is named by the others: at once when its process
// is gone (well before the timeout), within the timeout when it lives on.
TEST_F(GlooCommunicatorTest, ARankMissingFromASharedMemoryAllReduceIsNamed) {
  const double timeout_s = 20;
  auto opts = options("gone", 25, timeout_s);
  auto results = run_processes(
      2,
      [&](int r) {
        GlooCommunicator comm(r, 2, opts);
        require(comm.uses_shared_memory(), "2 ranks here should share memory");
        if (r == 1)
          return;  // leaves without reducing
        Params params(r, integer_valued);
        comm.all_reduce_gradients(params.named);
      },
      timeout_s + 20);
  EXPECT_TRUE(results[1].exited_ok) << results[1].message;
  EXPECT_FALSE(results[0].exited_ok);
  EXPECT_FALSE(results[0].killed) << "rank 0 hung";
  EXPECT_NE(results[0].message.find("rank 1 (pid "), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find(") is gone"), std::string::npos) << results[0].message;
  EXPECT_LT(results[0].seconds, timeout_s / 2) << "a dead peer must not cost the whole timeout";

  auto stays = options("stays", 25, 2);
  auto alive = run_processes(
      2,
      [&](int r) {
        GlooCommunicator comm(r, 2, stays);
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(5));  // alive, but never reduces
          return;
        }
        Params params(r, integer_valued);
        comm.all_reduce_gradients(params.named);
      },
      30);
  EXPECT_FALSE(alive[0].exited_ok);
  EXPECT_NE(alive[0].message.find("rank 1 did not bring its gradients within 2"), std::string::npos)
      << alive[0].message;
}

TEST_F(GlooCommunicatorTest, BucketsSmallerThanOneParameter) {
  // 4 floats a bucket: the 12- and 24-element parameters span several buckets; 42 elements -> 11.
  auto opts = options("small", 16.0 / (1024 * 1024));
  auto results = run_processes(
      3, [&](int r) { check_mean(r, 3, opts, integer_valued, 0.0, 11); }, 30);
  expect_all_ok(results);
}

TEST_F(GlooCommunicatorTest, GradientMeanOfFractionsWithin1e6) {
  auto opts = options("frac", 40.0 / (1024 * 1024));  // 10 floats a bucket -> 5 buckets
  auto results = run_processes(
      3, [&](int r) { check_mean(r, 3, opts, fractional, 1e-6, 5); }, 30);
  expect_all_ok(results);
}

TEST_F(GlooCommunicatorTest, BroadcastCopiesTheRootsBits) {
  // Through shared memory (copied through the segment) and through tcp: the root's bits, -0.0,
  // infinities and NaN included.
  const float specials[] = {-0.0f,
                            0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f};
  for (bool shm : {true, false}) {
    auto opts = options(shm ? "bcast-shm" : "bcast-tcp");
    opts.shared_memory = shm;
    auto results = run_processes(
        3,
        [&](int r) {
          GlooCommunicator comm(r, 3, opts);
          require(comm.uses_shared_memory() == shm, "uses_shared_memory() is not " + std::to_string(shm));
          Params params(r, fractional);
          Params root(1, fractional);
          for (Params* p : {&params, &root})
            for (size_t i = 0; i < std::size(specials); ++i)
              p->storage[0].value.data<float>()[i] = r == 1 || p == &root ? specials[i] : 7.0f;
          comm.broadcast_parameters(params.named, 1);
          for (size_t k = 0; k < params.storage.size(); ++k)
            require(std::memcmp(params.storage[k].value.raw(), root.storage[k].value.raw(),
                                params.storage[k].value.nbytes()) == 0,
                    "param " + std::to_string(k) + " differs from rank 1's bits");
          // Gradients are left alone.
          require(params.storage[0].grad.at_flat(0) == static_cast<float>(fractional(r, 0, 0)), "gradient changed");
        },
        30);
    expect_all_ok(results);
  }
}

TEST_F(GlooCommunicatorTest, AllGatherTakesEachPieceFromItsOwner) {
  // ZeRO-1's all-gather: piece k from rank owners[k], bit for bit (-0.0 and NaN on rank 2's piece),
  // in one shared-memory gather or by tcp broadcasts; owners that do not fit are refused.
  const std::vector<int> owners = {0, 2, 1, 2};  // one per parameter of Params
  for (bool shm : {true, false}) {
    auto opts = options(shm ? "gather-shm" : "gather-tcp");
    opts.shared_memory = shm;
    auto results = run_processes(
        3,
        [&](int r) {
          GlooCommunicator comm(r, 3, opts);
          require(comm.uses_shared_memory() == shm, "uses_shared_memory() is not " + std::to_string(shm));
          auto make = [](int rank) {
            Params p(rank, fractional);
            if (rank == 2) {
              p.storage[1].value.data<float>()[0] = -0.0f;
              p.storage[1].value.data<float>()[1] = std::numeric_limits<float>::quiet_NaN();
            }
            return p;
          };
          Params mine = make(r);
          comm.all_gather_parameters(mine.named, owners);
          for (size_t k = 0; k < mine.storage.size(); ++k) {
            const Params owner = make(owners[k]);
            require(std::memcmp(mine.storage[k].value.raw(), owner.storage[k].value.raw(),
                                mine.storage[k].value.nbytes()) == 0,
                    "piece " + std::to_string(k) + " differs from rank " + std::to_string(owners[k]) + "'s bits");
          }
          for (const std::vector<int>& bad : {std::vector<int>{0, 1}, std::vector<int>{0, 1, 3, 1}}) {
            bool refused = false;
            try {
              comm.all_gather_parameters(mine.named, bad);
            } catch (const lathe::Error&) {
              refused = true;
            }
            require(refused, "owners of the wrong count or rank were accepted");
          }
        },
        30);
    expect_all_ok(results);
  }
}

// broadcast_bytes carries any bytes (an NCCL unique id has zeros in it) through the store, each call
// under a key of its own: two messages from different roots in a row arrive in order.
TEST_F(GlooCommunicatorTest, BroadcastBytesThroughTheStoreFromAnyRoot) {
  auto opts = options("bytes");
  auto results = run_processes(
      3,
      [&](int r) {
        GlooCommunicator comm(r, 3, opts);
        std::string first = r == 0 ? std::string("id\0with\0zeros", 13) + std::string(115, '\x7f') : "stale";
        comm.broadcast_bytes(first, 0);
        require(first.size() == 128 && first.compare(0, 13, std::string("id\0with\0zeros", 13)) == 0,
                "rank " + std::to_string(r) + " got " + std::to_string(first.size()) + " bytes");
        std::string second = r == 2 ? "from rank 2" : "";
        comm.broadcast_bytes(second, 2);
        require(second == "from rank 2", "second message: '" + second + "'");
        std::string bad;
        bool refused = false;
        try {
          comm.broadcast_bytes(bad, 3);  // no rank 3: refused on every rank, before the store
        } catch (const lathe::Error&) {
          refused = true;
        }
        require(refused, "root 3 of 3 accepted");
      },
      30);
  expect_all_ok(results);
}

TEST_F(GlooCommunicatorTest, AllReduceSumOfDoubles) {
  auto opts = options("sum");
  auto results = run_processes(
      3,
      [&](int r) {
        GlooCommunicator comm(r, 3, opts);
        std::vector<double> v = {r + 0.25, 1e-9 * (r + 1), -2.0 * r, 1e12};
        comm.all_reduce_sum(v.data(), static_cast<int64_t>(v.size()));
        require(v[0] == 3.75, "v[0] = " + std::to_string(v[0]));
        require(std::abs(v[1] - 6e-9) < 1e-20, "v[1]");
        require(v[2] == -6.0, "v[2]");
        require(v[3] == 3e12, "v[3]");
      },
      30);
  expect_all_ok(results);
}

// Through shared memory every element is summed once, in rank order, by one rank: the sums of
// doubles (the per-step votes and metric sums) and the gradient mean of fractions of several
// pieces that cross chunk boundaries are bit-identical to that order computed here, on every rank,
// on the blocking and on the overlapped path; broadcasts of the same pieces give the root's values.
TEST_F(GlooCommunicatorTest, SharedMemorySumsInRankOrderBitForBitAndBroadcasts) {
  auto tiny = options("doubles", 16.0 / (1024 * 1024));  // 4 floats a chunk: 2 doubles
  auto big = options("pieces");
  // 5.5 chunks: the means take 6 chunk rounds, a broadcast (slots and result area: 4 chunks a round
  // on 3 ranks) 2 rounds, each cutting a piece.
  const std::vector<int64_t> sizes = {GlooCommunicator::kSharedMemoryChunk + 17, 3,
                                      GlooCommunicator::kSharedMemoryChunk * 9 / 2 - 20};
  auto value = [](int r, size_t k, int64_t i) {
    return static_cast<float>(std::sin(0.37 * r + 1.3 * static_cast<double>(k) + 0.011 * static_cast<double>(i)) * 3.7);
  };
  auto results = run_processes(
      3,
      [&](int r) {
        {
          GlooCommunicator comm(r, 3, tiny);
          require(comm.uses_shared_memory(), "3 ranks here should share memory");
          std::vector<double> v(7);
          for (size_t i = 0; i < v.size(); ++i)
            v[i] = std::sin(0.7 * r + 0.3 * static_cast<double>(i)) * 1e3;
          comm.all_reduce_sum(v.data(), static_cast<int64_t>(v.size()));  // 4 chunks of 2 doubles
          for (size_t i = 0; i < v.size(); ++i) {
            double expected = 0;
            for (int o = 0; o < 3; ++o)
              expected += std::sin(0.7 * o + 0.3 * static_cast<double>(i)) * 1e3;
            require(v[i] == expected, "sum " + std::to_string(i) + " is not the rank-order sum");
          }
        }
        GlooCommunicator comm(r, 3, big);
        FlatParams params(sizes);
        std::vector<Param>& storage = params.storage;
        const std::vector<NamedParam>& named = params.named;
        for (bool overlap : {false, true}) {
          params.average_gradients(comm, overlap, [&](size_t k, int64_t i) { return value(r, k, i); });
          for (size_t k = 0; k < storage.size(); ++k)
            for (int64_t i = 0; i < sizes[k]; ++i) {
              const float expected = ((value(0, k, i) + value(1, k, i)) + value(2, k, i)) / 3.0f;
              if (storage[k].grad.data<float>()[i] != expected)
                require(false, std::string(overlap ? "overlapped" : "blocking") + ": param " + std::to_string(k) + "[" +
                                   std::to_string(i) + "] is not the rank-order mean");
            }
        }
        // Broadcasts from two roots in a row, each several chunks long, through the same segment.
        for (int root : {2, 0}) {
          for (size_t k = 0; k < storage.size(); ++k)
            for (int64_t i = 0; i < sizes[k]; ++i)
              storage[k].value.data<float>()[i] = value(r, k, i) + 100.0f * static_cast<float>(root + 1);
          comm.broadcast_parameters(named, root);
          for (size_t k = 0; k < storage.size(); ++k)
            for (int64_t i = 0; i < sizes[k]; ++i)
              if (storage[k].value.data<float>()[i] != value(root, k, i) + 100.0f * static_cast<float>(root + 1))
                require(false, "broadcast from " + std::to_string(root) + ": param " + std::to_string(k) + "[" +
                                   std::to_string(i) + "] is not the root's");
        }
      },
      60);
  expect_all_ok(results);
}

// fp16 / bf16 buckets through shared memory, on 2 and 3 ranks, blocking and overlapped: every
// rank's gradients are bit for bit the documented rule (each rank's value rounded to 16 bits, summed
// in f32 in rank order, divided, rounded once, widened), computed here with dtype.h's scalar
// conversions; pieces cross the 16-bit chunks (2 x kSharedMemoryChunk elements) and two buckets
// split a parameter; the bytes are half of f32's.
TEST_F(GlooCommunicatorTest, SixteenBitBucketsThroughSharedMemoryFollowTheRuleBitForBit) {
  using Compression = GlooOptions::Compression;
  const int64_t chunk16 = 2 * GlooCommunicator::kSharedMemoryChunk;
  const std::vector<int64_t> sizes = {chunk16 + 17, 3, chunk16 * 3 / 2};  // 327,700: 2 buckets of 1 MiB
  auto value = [](int r, size_t k, int64_t i) {
    const double scale = std::pow(10.0, static_cast<double>(i % 9) - 5.0);  // fp16 subnormals to thousands
    return static_cast<float>(std::sin(0.37 * r + 1.3 * static_cast<double>(k) + 0.011 * static_cast<double>(i)) * 3.7 *
                              scale);
  };
  for (int world : {2, 3}) {
    std::vector<GlooOptions> opts;
    for (auto c : {Compression::fp16, Compression::bf16}) {
      opts.push_back(options((c == Compression::fp16 ? "shm16-" : "shmbf16-") + std::to_string(world), 1.0));
      opts.back().compression = c;
    }
    auto results = run_processes(
        world,
        [&](int r) {
          for (const GlooOptions& o : opts) {
            const bool h = o.compression == Compression::fp16;
            const std::string tag = h ? "fp16" : "bf16";
            auto round_trip = [h](float x) {
              return h ? lathe::f16_to_f32(lathe::f32_to_f16(x)) : lathe::bf16_to_f32(lathe::f32_to_bf16(x));
            };
            GlooCommunicator comm(r, world, o);
            require(comm.uses_shared_memory(), tag + ": ranks here should share memory");
            FlatParams params(sizes);
            const std::vector<Param>& storage = params.storage;
            for (bool overlap : {false, true}) {
              params.average_gradients(comm, overlap, [&](size_t k, int64_t i) { return value(r, k, i); });
              require(comm.last_bucket_count() == 2,
                      tag + ": " + std::to_string(comm.last_bucket_count()) + " buckets");
              require(comm.bytes_last_step() == (chunk16 * 5 / 2 + 20) * 2, tag + ": bytes");
              int64_t rounded = 0;
              for (size_t k = 0; k < storage.size(); ++k)
                for (int64_t i = 0; i < sizes[k]; ++i) {
                  float sum = round_trip(value(0, k, i));
                  float plain = value(0, k, i);
                  for (int o2 = 1; o2 < world; ++o2) {
                    sum += round_trip(value(o2, k, i));
                    plain += value(o2, k, i);
                  }
                  const float want = round_trip(sum / static_cast<float>(world));
                  rounded += want != plain / static_cast<float>(world);
                  const float got = storage[k].grad.data<float>()[i];
                  if (std::memcmp(&got, &want, sizeof got) != 0)
                    require(false, tag + (overlap ? " overlapped" : " blocking") + ": param " + std::to_string(k) +
                                       "[" + std::to_string(i) + "] = " + std::to_string(got) + ", the rule gives " +
                                       std::to_string(want));
                }
              require(rounded > 1000, tag + ": only " + std::to_string(rounded) + " elements differ from f32");
            }
          }
        },
        120);
    expect_all_ok(results);
  }
}

TEST_F(GlooCommunicatorTest, BarrierWaitsForTheSlowestRank) {
  auto opts = options("barrier");
  const auto folder = m_folder;
  auto results = run_processes(
      3,
      [&](int r) {
        GlooCommunicator comm(r, 3, opts);
        std::this_thread::sleep_for(std::chrono::milliseconds(300 * r));
        std::ofstream(folder / ("arrived." + std::to_string(r))) << r;
        comm.barrier();
        for (int o = 0; o < 3; ++o)
          require(std::filesystem::exists(folder / ("arrived." + std::to_string(o))),
                  "passed the barrier before rank " + std::to_string(o) + " arrived");
      },
      30);
  expect_all_ok(results);
}

TEST_F(GlooCommunicatorTest, TwoRunsInOneFolderDoNotMeet) {
  auto a = options("runA");
  auto b = options("runB");
  // Children 0,1 are run A (values 0/1), 2,3 run B (values 10/20): each run's mean is its own.
  auto results = run_processes(
      4,
      [&](int i) {
        const bool in_a = i < 2;
        GlooCommunicator comm(i % 2, 2, in_a ? a : b);
        std::vector<double> v = {in_a ? double(i) : 10.0 * (i - 1)};
        comm.all_reduce_sum(v.data(), 1);
        require(v[0] == (in_a ? 1.0 : 30.0), "sum " + std::to_string(v[0]));
      },
      30);
  expect_all_ok(results);
}

TEST_F(GlooCommunicatorTest, ARankThatNeverJoinsIsNamedWithinTheTimeout) {
  const double timeout_s = 2;
  auto opts = options("missing", 25, timeout_s);
  // World of 3, rank 2 never starts.
  auto results = run_processes(
      2, [&](int r) { GlooCommunicator comm(r, 3, opts); }, timeout_s + 10);
  for (const auto& r : results) {
    EXPECT_FALSE(r.exited_ok) << "rank " << r.index;
    EXPECT_FALSE(r.killed) << "rank " << r.index << " hung";
    EXPECT_LT(r.seconds, timeout_s + 2) << "rank " << r.index;
    EXPECT_NE(r.message.find("ranks 2 did not join"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("file store " + m_folder.string()), std::string::npos) << r.message;
  }
}

TEST_F(GlooCommunicatorTest, ANonF32GradientIsAClearError) {
  auto opts = options("dtype");
  auto results = run_processes(
      2,
      [&](int r) {
        GlooCommunicator comm(r, 2, opts);
        Param p{"w", Tensor::zeros({4}, lathe::DType::f32), Tensor::zeros({4}, lathe::DType::f64)};
        std::vector<NamedParam> named = {{"0.w", &p}};
        try {
          comm.all_reduce_gradients(named);
        } catch (const lathe::Error& e) {
          require(std::string(e.what()).find("the gradient of 0.w is f64") != std::string::npos, e.what());
          return;
        }
        throw std::runtime_error("no error for an f64 gradient");
      },
      30);
  expect_all_ok(results);
}

TEST(GlooOptionsTest, BadOptionsAreConfigErrors) {
  GlooOptions o;
  o.rendezvous = "redis://localhost:notaport";
  EXPECT_THROW(GlooCommunicator(0, 2, o), lathe::ConfigError);
  o.rendezvous = "/tmp";
  o.bucket_mb = 0;
  EXPECT_THROW(GlooCommunicator(0, 2, o), lathe::ConfigError);
  o.bucket_mb = 25;
  EXPECT_THROW(GlooCommunicator(2, 2, o), lathe::ConfigError);
}

}  // namespace
