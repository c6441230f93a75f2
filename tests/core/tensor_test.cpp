// Tensor layouts, views and element access; DType conversions against known bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/core/rng.h"
#include "engine/core/tensor.h"

namespace lathe {

TEST(Tensor, ContiguousAndChannelsLastStrides) {
  Tensor a = Tensor::empty({2, 3, 4, 5}, DType::f32);
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_EQ(a.strides(), (std::vector<int64_t>{60, 20, 5, 1}));
  Tensor b = Tensor::empty({2, 3, 4, 5}, DType::f32, Device::cpu(), MemoryFormat::channels_last);
  EXPECT_TRUE(b.is_channels_last());
  EXPECT_FALSE(b.is_contiguous());
  EXPECT_TRUE(b.is_dense());
  EXPECT_EQ(b.strides(), (std::vector<int64_t>{60, 1, 15, 3}));
}

TEST(Tensor, CopyBetweenLayoutsKeepsLogicalValues) {
  Tensor a = Tensor::empty({2, 3, 4, 5}, DType::f32);
  for (int64_t i = 0; i < a.numel(); ++i)
    a.set_flat(i, static_cast<double>(i));
  Tensor b = Tensor::empty({2, 3, 4, 5}, DType::f32, Device::cpu(), MemoryFormat::channels_last);
  a.copy_to(b);
  EXPECT_EQ(b.get({1, 2, 3, 4}), a.get({1, 2, 3, 4}));
  EXPECT_EQ(b.get({0, 1, 0, 2}), 0 * 60 + 1 * 20 + 0 * 5 + 2);
  // In memory, channels are innermost: element (0, 1, 0, 0) sits right after (0, 0, 0, 0).
  EXPECT_EQ(b.data<float>()[1], a.get({0, 1, 0, 0}));
  Tensor c = b.contiguous_copy();
  EXPECT_EQ(std::memcmp(c.raw(), a.raw(), a.nbytes()), 0);
}

TEST(Tensor, SliceAndViewShareMemory) {
  Tensor a = Tensor::zeros({6, 4}, DType::f32);
  Tensor s = a.slice0(2, 4);
  s.set({0, 1}, 7.0);
  EXPECT_EQ(a.get({2, 1}), 7.0);
  Tensor v = a.view({24});
  EXPECT_EQ(v.get({9}), 7.0);
  EXPECT_THROW(a.view({5, 5}), Error);
  EXPECT_THROW(a.slice0(3, 7), Error);
}

TEST(Tensor, ReinterpretReadsDenseMemoryInMemoryOrder) {
  // A channels-last [N, C, H, W] holds N rows of H*W*C values (the INT8 plan's flatten).
  Tensor t = Tensor::empty({2, 3, 2, 2}, DType::f32, Device::cpu(), MemoryFormat::channels_last);
  for (int64_t i = 0; i < t.numel(); ++i)
    static_cast<float*>(t.raw())[i] = static_cast<float>(i);
  const Tensor rows = t.reinterpret({2, 12});
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_TRUE(rows.same_memory(t));
  EXPECT_EQ(rows.get({1, 0}), 12.0);
  EXPECT_EQ(rows.get({0, 1}), t.get({0, 1, 0, 0}));  // the second value in memory is channel 1
  EXPECT_THROW(t.reinterpret({5, 5}), Error);
}

TEST(Tensor, WrongTypedAccessIsRejected) {
  Tensor a = Tensor::zeros({3}, DType::f32);
  EXPECT_THROW(a.data<double>(), Error);
  EXPECT_NO_THROW(a.data<float>());
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties go to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(-2.5f)), -2.5f);
}

TEST(DType, F16KnownPatterns) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);               // largest finite half
  EXPECT_EQ(f32_to_f16(70000.0f), 0x7c00);               // overflows to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  // Every half value survives f16 -> f32 -> f16 unchanged (NaNs keep being NaN).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f))
      continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(Rng, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
  Rng u(1);
  double mean = 0;
  for (int i = 0; i < 100000; ++i)
    mean += u.uniform();
  EXPECT_NEAR(mean / 100000, 0.5, 0.01);
}

}  // namespace lathe
