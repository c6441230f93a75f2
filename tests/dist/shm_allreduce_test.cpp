// ShmAllReduce on its own, in one process: two calls at once on one rank are refused (the
// generation counters are shared, so a second thread would corrupt the first one's chunk), and a
// rank that never maps the segment is named at the timeout. The 16-bit mean (fp16 / bf16 gradient
// compression) on 2 and 3 ranks as threads, in chunks of a few elements: bit for bit the documented
// rule computed here with the scalar conversions, hand-computed values that only that rule gives,
// and infinities and NaN. The mean in a gradient arena (ShmGradArena) every rank maps: the slots'
// bits in every rank's copy, nothing outside the regions touched; and one-synchronisation small
// sums between the other calls, exact over thousands of rounds.
#include "engine/dist/shm_allreduce.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/dist/shm_grad_arena.h"

using lathe::dist::ShmAllReduce;
using lathe::dist::ShmGradArena;

namespace {

// Runs fn(rank, comm) for every rank of a fresh segment of `chunk` f32 elements, each rank on its own
// thread; returns the ranks' error messages ("" for none).
std::vector<std::string> on_threads(int world, int64_t chunk, const std::function<void(int, ShmAllReduce&)>& fn) {
  static int serial = 0;
  const std::string name = "/lathe-test-16-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
  ShmAllReduce::create(name, world, chunk);
  std::vector<std::unique_ptr<ShmAllReduce>> ranks;
  for (int r = 0; r < world; ++r)
    ranks.push_back(std::make_unique<ShmAllReduce>(name, r, world, chunk, std::chrono::milliseconds(20000)));
  ShmAllReduce::unlink(name);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r, *ranks[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  return errors;
}

// The rule, element by element, with dtype.h's scalar conversions (the implementation converts
// arrays, F16C for fp16): widen(round16(sum in rank order of widen(round16(x_k))) / world)).
float expected_mean16(ShmAllReduce::Format f, const std::vector<float>& per_rank) {
  const bool h = f == ShmAllReduce::Format::fp16;
  auto round_trip = [h](float x) {
    return h ? lathe::f16_to_f32(lathe::f32_to_f16(x)) : lathe::bf16_to_f32(lathe::f32_to_bf16(x));
  };
  float sum = round_trip(per_rank[0]);
  for (size_t k = 1; k < per_rank.size(); ++k)
    sum += round_trip(per_rank[k]);
  return round_trip(sum / static_cast<float>(per_rank.size()));
}

float grad_value(int r, size_t piece, int64_t i) {
  // Fractions over eight decades (fp16's subnormals to thousands), both signs.
  const double scale = std::pow(10.0, static_cast<double>(i % 9) - 5.0);
  return static_cast<float>(std::sin(0.37 * r + 1.3 * static_cast<double>(piece) + 0.011 * static_cast<double>(i)) *
                            3.7 * scale);
}

}  // namespace

// Pieces that cross the chunks (10 f32 elements a slot: 20 in 16 bits) at every offset, on 2 and 3
// ranks (shares of 7 and 10 elements of a chunk): every rank ends with the rule's bits.
TEST(ShmAllReduce, SixteenBitMeanIsTheRoundedRankOrderMeanBitForBit) {
  const std::vector<int64_t> sizes = {37, 1, 20, 53, 3};
  for (auto format : {ShmAllReduce::Format::fp16, ShmAllReduce::Format::bf16})
    for (int world : {2, 3}) {
      const std::string tag = std::string(format == ShmAllReduce::Format::fp16 ? "fp16" : "bf16") + " on " +
                              std::to_string(world) + " ranks";
      std::vector<std::vector<std::vector<float>>> got(static_cast<size_t>(world));
      const auto errors = on_threads(world, 10, [&](int r, ShmAllReduce& comm) {
        EXPECT_EQ(comm.chunk_elements(format), 20);
        auto& mine = got[static_cast<size_t>(r)];
        std::vector<ShmAllReduce::Span> spans;
        mine.resize(sizes.size());
        for (size_t k = 0; k < sizes.size(); ++k) {
          for (int64_t i = 0; i < sizes[k]; ++i)
            mine[k].push_back(grad_value(r, k, i));
          spans.push_back({mine[k].data(), sizes[k]});
        }
        comm.all_reduce_mean(spans, static_cast<float>(world), format);
      });
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(errors[static_cast<size_t>(r)], "") << tag;
      int64_t inexact = 0;
      for (size_t k = 0; k < sizes.size(); ++k)
        for (int64_t i = 0; i < sizes[k]; ++i) {
          std::vector<float> per_rank;
          for (int r = 0; r < world; ++r)
            per_rank.push_back(grad_value(r, k, i));
          const float want = expected_mean16(format, per_rank);
          float f32_mean = per_rank[0];
          for (int r = 1; r < world; ++r)
            f32_mean += per_rank[static_cast<size_t>(r)];
          f32_mean /= static_cast<float>(world);
          inexact += want != f32_mean;
          for (int r = 0; r < world; ++r) {
            const float g = got[static_cast<size_t>(r)][k][static_cast<size_t>(i)];
            ASSERT_EQ(std::memcmp(&g, &want, sizeof g), 0)
                << tag << ": rank " << r << " piece " << k << "[" << i << "] = " << g << ", the rule gives " << want;
          }
        }
      EXPECT_GT(inexact, 50) << tag << ": the values are too round to tell 16 bits from f32";
    }
}

// Values worked out by hand: each rank rounds before the sum (1 + 2^-12 is 1 in fp16, 1 + 2^-9 is 1
// in bf16), the mean is rounded once after the division (fp16 (1 + 1 + 2) / 3 = 1.3330078125, where
// rounding the sum and dividing in f32 would give 1.3333334), and the sum is never rounded (fp16
// 60000 + 60000 = 120000 would be inf in 16 bits; its mean 60000 is not). An infinity or a NaN on
// one rank is one on every rank; fp16 70000 rounds to inf on its rank.
TEST(ShmAllReduce, SixteenBitMeanRoundsEachRanksValueAndTheMeanOnce) {
  using F = ShmAllReduce::Format;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    F format;
    std::vector<float> per_rank;
    float want;  // NaN: any NaN
  };
  const std::vector<Case> cases = {
      {F::fp16, {1.0f + 0x1p-12f, 1.0f + 0x1p-12f}, 1.0f},
      {F::bf16, {1.0f + 0x1p-9f, 1.0f + 0x1p-9f}, 1.0f},
      {F::fp16, {1.0f, 1.0f, 2.0f}, 1.3330078125f},
      {F::bf16, {1.0f, 1.0f, 2.0f}, 1.3359375f},  // 4/3 to 8 significant bits: 1.01010101b
      {F::fp16, {60000.0f, 60000.0f}, 60000.0f},
      {F::fp16, {70000.0f, -1.0f}, inf},
      {F::bf16, {-inf, 1.0f, 2.0f}, -inf},
      {F::fp16, {inf, -inf}, nan},
      {F::fp16, {nan, 1.0f, 2.0f}, nan},
      {F::bf16, {1.0f, nan}, nan},
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& cs = cases[c];
    const int world = static_cast<int>(cs.per_rank.size());
    std::vector<float> got(cs.per_rank);
    const auto errors = on_threads(world, 4, [&](int r, ShmAllReduce& comm) {
      comm.all_reduce_mean({{&got[static_cast<size_t>(r)], 1}}, static_cast<float>(world), cs.format);
    });
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(errors[static_cast<size_t>(r)], "") << "case " << c;
      const float g = got[static_cast<size_t>(r)];
      if (std::isnan(cs.want))
        EXPECT_TRUE(std::isnan(g)) << "case " << c << " rank " << r << ": " << g;
      else
        EXPECT_EQ(g, cs.want) << "case " << c << " rank " << r;
      EXPECT_EQ(std::memcmp(&g, &got[0], sizeof g), 0) << "case " << c << ": ranks 0 and " << r << " differ";
    }
  }
}

TEST(ShmAllReduce, TwoCallsAtOnceOnOneRankAreRefused) {
  const std::string name = "/lathe-test-busy-" + std::to_string(getpid());
  ShmAllReduce::create(name, 2, 64);
  ShmAllReduce rank0(name, 0, 2, 64, std::chrono::milliseconds(1500));
  ShmAllReduce::unlink(name);
  std::string first_error;
  std::thread first([&] {
    double v[3] = {1, 2, 3};
    try {
      rank0.all_reduce_sum(v, 3);  // rank 1 never comes: waits until the timeout
    } catch (const lathe::Error& e) {
      first_error = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  float g[4] = {1, 2, 3, 4};
  try {
    rank0.all_reduce_mean({{g, 4}}, 1.0f);
    ADD_FAILURE() << "a second call while the first waits was accepted";
  } catch (const lathe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("two shared-memory collectives at once"), std::string::npos) << e.what();
  }
  first.join();
  EXPECT_NE(first_error.find("rank 1 did not bring its values within 1.5"), std::string::npos) << first_error;
  // Free again after the first call ended: a one-rank sum of the others' absence still times out,
  // but is admitted.
  try {
    rank0.all_reduce_mean({{g, 4}}, 1.0f);
  } catch (const lathe::Error& e) {
    EXPECT_EQ(std::string(e.what()).find("at once"), std::string::npos) << e.what();
  }
}

namespace {

// Every rank's arena of a fresh segment for gradients of `sizes`, each mapped on its own (at its own
// address, as in separate processes).
std::vector<std::unique_ptr<ShmGradArena>> arenas_for(int world, const ShmGradArena::Layout& layout) {
  static int serial = 0;
  const std::string name = "/lathe-test-arena-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
  ShmGradArena::create(name, world, layout.region_elements);
  std::vector<std::unique_ptr<ShmGradArena>> arenas;
  for (int r = 0; r < world; ++r)
    arenas.push_back(std::make_unique<ShmGradArena>(name, r, world, layout.region_elements));
  ShmGradArena::unlink(name);
  return arenas;
}

}  // namespace

// A bucket of a reverse-order stream (a whole gradient, the tail of one, two more) in the arena, on 2
// and 3 ranks: every rank's copy of every element in it ends with the bits the slots' path
// (all_reduce_mean, chunks of 10 elements) gives for the same values, which are the rank-order sum
// divided once; the gradients and elements outside the bucket keep their values.
TEST(ShmAllReduce, MappedMeanWritesTheSlotsBitsIntoEveryRanksCopyAndNothingElse) {
  const std::vector<int64_t> sizes = {37, 1, 20, 53, 3, 3000};
  const ShmGradArena::Layout layout = ShmGradArena::layout(sizes);
  const std::vector<int64_t>& at = layout.offsets;
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_EQ(at[i] % 16, 0) << "gradient " << i << " is not on a cache line of its own";
  const std::vector<ShmAllReduce::Region> bucket = {{at[5], 3000}, {at[0] + 4, 33}, {at[2], 20}, {at[3], 53}};
  for (int world : {2, 3}) {
    auto arenas = arenas_for(world, layout);
    const int64_t region = layout.region_elements;
    std::vector<std::vector<float>> before(static_cast<size_t>(world)), slots_path(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      float* mine = arenas[static_cast<size_t>(r)]->mine();
      for (int64_t j = 0; j < region; ++j)
        mine[j] = grad_value(r, 0, j);
      before[static_cast<size_t>(r)].assign(mine, mine + region);
      slots_path[static_cast<size_t>(r)] = before[static_cast<size_t>(r)];
    }
    auto errors = on_threads(world, 10, [&](int r, ShmAllReduce& comm) {
      std::vector<ShmAllReduce::Span> spans;
      for (const auto& piece : bucket)
        spans.push_back({slots_path[static_cast<size_t>(r)].data() + piece.offset, piece.n});
      comm.all_reduce_mean(spans, static_cast<float>(world));
    });
    for (const auto& e : errors)
      ASSERT_EQ(e, "");
    errors = on_threads(world, 10, [&](int r, ShmAllReduce& comm) {
      const ShmGradArena& a = *arenas[static_cast<size_t>(r)];
      comm.all_reduce_mean_mapped(a.base(), a.stride(), bucket, static_cast<float>(world));
    });
    for (const auto& e : errors)
      ASSERT_EQ(e, "");
    std::vector<char> in_bucket(static_cast<size_t>(region), 0);
    for (const auto& piece : bucket)
      for (int64_t j = piece.offset; j < piece.offset + piece.n; ++j)
        in_bucket[static_cast<size_t>(j)] = 1;
    int64_t mismatches = 0;
    for (int r = 0; r < world; ++r) {
      const float* mine = arenas[static_cast<size_t>(r)]->mine();
      for (int64_t j = 0; j < region; ++j) {
        float want = before[static_cast<size_t>(r)][static_cast<size_t>(j)];
        if (in_bucket[static_cast<size_t>(j)]) {
          want = grad_value(0, 0, j);
          for (int k = 1; k < world; ++k)
            want += grad_value(k, 0, j);
          want /= static_cast<float>(world);
          if (std::memcmp(&want, &slots_path[0][static_cast<size_t>(j)], sizeof want) != 0 && mismatches++ < 5)
            ADD_FAILURE() << "the slots' path gives " << slots_path[0][static_cast<size_t>(j)] << " at " << j;
        }
        if (std::memcmp(&want, &mine[j], sizeof want) != 0 && mismatches++ < 5)
          ADD_FAILURE() << world << " ranks: rank " << r << "'s element " << j << " is " << mine[j] << ", not " << want
                        << (in_bucket[static_cast<size_t>(j)] ? " (the mean)" : " (outside the bucket)");
      }
    }
    EXPECT_EQ(mismatches, 0) << world << " ranks";
  }
}

// Sums of up to kSmallValues doubles take one synchronisation, their values in one of two areas by
// the generation's parity: a fast rank's next sum must not overwrite values a slow one still reads.
// Thousands of rounds on 3 ranks, the small sums between chunked sums, slot means and arena means
// (each of which moves the generation on by one or several), every result exact.
TEST(ShmAllReduce, OneSynchronisationSumsStayExactBetweenTheOtherCollectives) {
  const int world = 3;
  const ShmGradArena::Layout layout = ShmGradArena::layout({40});
  auto arenas = arenas_for(world, layout);
  std::vector<std::string> wrong(static_cast<size_t>(world));
  auto errors = on_threads(world, 10, [&](int r, ShmAllReduce& comm) {
    auto fail = [&](const std::string& what) {
      if (wrong[static_cast<size_t>(r)].empty())
        wrong[static_cast<size_t>(r)] = what;
    };
    for (int it = 0; it < 4000; ++it) {
      // Values whose sums are exact in double: integers.
      double v[3] = {static_cast<double>(r + it), static_cast<double>(r * it), 1.0};
      comm.all_reduce_sum(v, 3);
      if (v[0] != 3.0 * it + 3 || v[1] != 3.0 * it || v[2] != 3)
        fail("small sum of round " + std::to_string(it) + ": " + std::to_string(v[0]) + ", " + std::to_string(v[1]) +
             ", " + std::to_string(v[2]));
      if (it % 7 == 0) {  // 40 doubles in 8 chunks of 5
        std::vector<double> big(40);
        for (size_t i = 0; i < big.size(); ++i)
          big[i] = static_cast<double>(r * 100 + static_cast<int>(i) + it);
        comm.all_reduce_sum(big.data(), 40);
        for (size_t i = 0; i < big.size(); ++i)
          if (big[i] != 300.0 + 3.0 * (static_cast<double>(i) + it))
            fail("chunked sum of round " + std::to_string(it));
      }
      if (it % 11 == 0) {  // 25 floats in 3 chunks of 10
        std::vector<float> g(25, static_cast<float>(r + 1));
        comm.all_reduce_mean({{g.data(), 25}}, 1.0f);
        for (float x : g)
          if (x != 6.0f)
            fail("slot mean of round " + std::to_string(it));
      }
      if (it % 13 == 0) {
        const ShmGradArena& a = *arenas[static_cast<size_t>(r)];
        for (int j = 0; j < 40; ++j)
          a.mine()[j] = static_cast<float>(r + j);
        comm.all_reduce_mean_mapped(a.base(), a.stride(), {{0, 40}}, 1.0f);
        for (int j = 0; j < 40; ++j)
          if (a.mine()[j] != static_cast<float>(3 + 3 * j))
            fail("arena mean of round " + std::to_string(it));
      }
    }
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << "rank " << r;
  }
}
