// Independent reference roundings for the precision tests: the nearest bf16/f16 value found by
// comparing distances in double between neighbouring representable values (ties to the even
// significand, IEEE overflow to inf), with no bit tricks shared with the code under test.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace lathe::test {

inline float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Every non-negative finite f16 value, ascending, with its significand parity (from the IEEE
/// definition: subnormal m * 2^-24, normal (1024 + m) * 2^(e - 25)).
struct F16Table {
  std::vector<double> values;
  std::vector<bool> even;
  F16Table() {
    for (int e = 0; e < 31; ++e)
      for (int m = 0; m < 1024; ++m) {
        values.push_back(e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
        even.push_back(m % 2 == 0);
      }
  }
};

/// The value an f16 holds after rounding `x` to nearest even; values at or beyond 65504 + half an
/// ulp (65520) become inf, NaN stays NaN.
inline float reference_round_f16(float x) {
  static const F16Table table;
  if (std::isnan(x))
    return x;
  const double a = std::fabs(static_cast<double>(x));
  double r;
  if (a >= 65520.0) {
    r = std::numeric_limits<double>::infinity();
  } else {
    const auto& v = table.values;
    const size_t hi = static_cast<size_t>(std::lower_bound(v.begin(), v.end(), a) - v.begin());
    if (hi < v.size() && v[hi] == a) {
      r = a;
    } else {
      const size_t lo = hi - 1;  // a > 0 here, and a < 65520 keeps hi in range or at the end
      const double upper = hi < v.size() ? v[hi] : 65536.0;
      const double dl = a - v[lo], du = upper - a;
      const bool take_upper = du < dl || (du == dl && (hi < v.size() ? table.even[hi] : true));
      r = take_upper ? (hi < v.size() ? upper : std::numeric_limits<double>::infinity()) : v[lo];
    }
  }
  return static_cast<float>(std::signbit(x) ? -r : r);
}

/// The value a bf16 holds after rounding `x` to nearest even (bf16 = the top 16 bits of an f32).
inline float reference_round_bf16(float x) {
  if (std::isnan(x) || std::isinf(x))
    return x;
  const uint32_t u = bits_of(x);
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  const uint32_t lo_bits = mag & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
  const double a = std::fabs(static_cast<double>(x));
  const double lo = static_cast<double>(float_from_bits(lo_bits));
  // Above the largest finite bf16 the next value up is the virtual 2^128: IEEE rounds to inf there.
  const double hi = hi_bits >= 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(float_from_bits(hi_bits));
  const double dl = a - lo, du = hi - a;
  const bool lo_even = ((lo_bits >> 16) & 1u) == 0;
  uint32_t out;
  if (dl < du || (dl == du && lo_even))
    out = lo_bits;
  else
    out = hi_bits >= 0x7f800000u ? 0x7f800000u : hi_bits;
  return float_from_bits(sign | out);
}

/// Floats that exercise the rounding: special values, f16 subnormals and their halfway points, the
/// overflow boundary, bf16 ties, f32 subnormals, and random bit patterns across every exponent.
inline std::vector<float> rounding_probe_values(uint64_t seed, int random_count) {
  std::vector<float> v = {0.f,
                          -0.f,
                          1.f,
                          -1.f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          float_from_bits(0x7f800001u),  // signalling NaN
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(),
                          65504.f,
                          65519.f,
                          65519.996f,
                          65520.f,
                          65536.f,
                          -65520.f,
                          1.f + 0x1p-11f,       // f16 tie: rounds down to 1 (even)
                          1.f + 3 * 0x1p-11f,   // f16 tie: rounds up (even)
                          1.f + 0x1p-8f,        // bf16 tie: rounds down
                          1.f + 3 * 0x1p-8f,    // bf16 tie: rounds up
                          0x1p-24f,             // smallest f16 subnormal
                          0x1p-25f,             // tie between 0 and it: rounds to 0
                          3 * 0x1p-25f,         // tie between 1 and 2 subnormal ulps: rounds to 2
                          0x1p-25f * 1.0001f,   // just above the tie: rounds up
                          0x1p-26f,             // underflows to 0
                          0x1p-14f,             // smallest normal f16
                          0x1p-14f - 0x1p-25f,  // tie below the smallest normal
                          float_from_bits(0x7f7fffffu),
                          float_from_bits(0x7f7f8000u)};  // bf16 tie at the top: rounds to inf (odd)
  for (int i = -30; i <= 20; ++i)
    v.push_back(std::ldexp(1.3f, i));
  uint64_t s = seed;
  for (int i = 0; i < random_count; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v.push_back(float_from_bits(static_cast<uint32_t>(s >> 32)));
    // Values in the f16 range, with random low bits (the ones that decide rounding).
    v.push_back(std::ldexp(static_cast<float>((s >> 8) & 0xffffff) / 0x1p24f, static_cast<int>((s >> 40) % 42) - 27));
  }
  return v;
}

/// Equal as values, with NaN matching NaN and the sign of zero compared.
inline bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

}  // namespace lathe::test
