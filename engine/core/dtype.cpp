// DType names and sizes, and the IEEE half conversions (bit-exact, no hardware needed).
#include "engine/core/dtype.h"

#include "engine/core/error.h"

namespace lathe {

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::bf16:
      return 2;
    case DType::f16:
      return 2;
    case DType::s8:
      return 1;
    case DType::s32:
      return 4;
    case DType::u8:
      return 1;
  }
  LATHE_FAIL("unknown dtype");
}

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::s8:
      return "s8";
    case DType::s32:
      return "s32";
    case DType::u8:
      return "u8";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::s8, DType::s32, DType::u8})
    if (dtype_name(dt) == name)
      return dt;
  LATHE_FAIL("unknown dtype '", name, "': allowed f32, f64, bf16, f16, s8, s32, u8");
}

bool is_floating(DType dt) { return dt == DType::f32 || dt == DType::f64 || dt == DType::bf16 || dt == DType::f16; }

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u)  // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (absx < 0x33000000u)
      return static_cast<uint16_t>(sign);  // < 2^-25 rounds to 0
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(absx >> 23);  // 14 + (113 - exp) ... right shift amount
    const uint32_t rounded = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    uint32_t h = rounded + ((rem > half || (rem == half && (rounded & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    h += 1;
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      exp = 113;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      out = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace lathe
