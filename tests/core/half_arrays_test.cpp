// The f16 array conversions and sum (engine/core/half_arrays.h) against the scalar f32_to_f16 /
// f16_to_f32 of dtype.h, bit for bit: every one of the 65,536 halves, a stride through all 2^32 f32
// bit patterns (subnormals, ties, overflow, NaN), and sums of every exponent pair, with lengths that
// leave a tail after the 8-wide blocks; where the sum is NaN, any NaN is right. On a CPU without F16C
// both sides are the scalar rule.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/half_arrays.h"

namespace lathe {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool is_half_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(HalfArrays, EveryHalfWidensAsTheScalarRule) {
  std::printf("[ path ] %s\n", cpu_has_f16c() ? "F16C" : "scalar (no F16C on this CPU)");
  std::vector<uint16_t> h(65536 + 5);
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = static_cast<uint16_t>(i);
  std::vector<float> f(h.size());
  f16_to_f32_array(h.data(), f.data(), static_cast<int64_t>(h.size()));
  int bad = 0;
  for (size_t i = 0; i < h.size(); ++i)
    if (bits(f[i]) != bits(f16_to_f32(h[i])) && ++bad < 5)
      ADD_FAILURE() << "half 0x" << std::hex << h[i] << ": 0x" << bits(f[i]) << " vs 0x" << bits(f16_to_f32(h[i]));
  EXPECT_EQ(bad, 0);
}

TEST(HalfArrays, F32BitPatternsNarrowAsTheScalarRule) {
  std::vector<float> f;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4093)  // a prime stride: every exponent, many mantissas
    f.push_back(from_bits(static_cast<uint32_t>(u)));
  for (uint32_t e = 0; e < 256; ++e)  // exact ties (half-way between two halves) and their neighbours
    for (uint32_t low : {0x1000u, 0x0fffu, 0x1001u, 0x3000u})
      for (uint32_t sign : {0u, 0x80000000u})
        f.push_back(from_bits(sign | (e << 23) | low));
  for (float x : {65504.f, 65519.99f, 65520.f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 6.1e-5f})
    f.push_back(x);
  std::vector<uint16_t> h(f.size());
  f32_to_f16_array(f.data(), h.data(), static_cast<int64_t>(f.size()));
  int bad = 0;
  for (size_t i = 0; i < f.size(); ++i)
    if (h[i] != f32_to_f16(f[i]) && ++bad < 5)
      ADD_FAILURE() << "f32 0x" << std::hex << bits(f[i]) << ": 0x" << h[i] << " vs 0x" << f32_to_f16(f[i]);
  EXPECT_EQ(bad, 0) << "of " << f.size();
}

TEST(HalfArrays, SumsOfHalvesRoundAsTheScalarRule) {
  std::mt19937 rng(7);
  const int64_t n = 200003;  // not a multiple of 8
  std::vector<uint16_t> a(n), b(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint16_t>(rng());
    b[i] = static_cast<uint16_t>(rng());
    if (i % 3 == 0)  // near exponents, so that sums round and cancel, not only saturate
      b[i] = static_cast<uint16_t>((a[i] & 0xfc00u) ^ (rng() & 0x83ffu));
  }
  a[8] = 0x7c00;  // inf + -inf -> NaN
  b[8] = 0xfc00;
  f16_sum_array(a.data(), b.data(), out.data(), n);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t want = f32_to_f16(f16_to_f32(a[i]) + f16_to_f32(b[i]));
    // NaN + NaN: IEEE 754 leaves open which operand's sign and payload survive, and compilers may
    // swap the operands of an add (clang does under the sanitizers), so any NaN answers a NaN.
    if (is_half_nan(want) && is_half_nan(out[i]))
      continue;
    if (out[i] != want && ++bad < 5)
      ADD_FAILURE() << std::hex << "0x" << a[i] << " + 0x" << b[i] << ": 0x" << out[i] << " vs 0x" << want;
  }
  EXPECT_EQ(bad, 0);
  std::vector<uint16_t> in_place = a;  // out may equal a
  f16_sum_array(in_place.data(), b.data(), in_place.data(), n);
  EXPECT_EQ(in_place, out);
}

}  // namespace
}  // namespace lathe
