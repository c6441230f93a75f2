// Element types of tensors and the conversions between the 16-bit floats and f32.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lathe {

enum class DType : uint8_t { f32, f64, bf16, f16, s8, s32, u8 };

size_t dtype_size(DType dt);
std::string_view dtype_name(DType dt);
/// Parses "f32", "bf16", ... ; throws lathe::Error naming the allowed values.
DType dtype_from_name(std::string_view name);
bool is_floating(DType dt);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::s8;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::s32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}

/// bf16: the top 16 bits of an f32, rounded to nearest even (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// IEEE half precision, round to nearest even, with subnormals, inf and NaN.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace lathe
