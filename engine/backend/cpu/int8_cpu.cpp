// CPU INT8 capability detection through oneDNN's effective ISA (see int8_cpu.h).
#include "engine/backend/cpu/int8_cpu.h"

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>

namespace lathe {

namespace {
// dnnl_cpu_isa_t values are bit sets; 0x40 is the AVX512-VNNI bit that avx512_core_vnni,
// avx512_core_bf16 and avx512_core_amx all contain.
constexpr unsigned kAvx512VnniBit = 0x40;
}  // namespace

bool cpu_int8_dot_is_exact() {
  static const bool exact = (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & kAvx512VnniBit) != 0;
  return exact;
}

std::string cpu_int8_isa_name() {
  using isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case isa::sse41:
      return "sse41";
    case isa::avx:
      return "avx";
    case isa::avx2:
      return "avx2";
    case isa::avx2_vnni:
      return "avx2_vnni";
    case isa::avx512_mic:
      return "avx512_mic";
    case isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case isa::avx512_core:
      return "avx512_core";
    case isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
}

int effective_weight_bits(int requested, Int8WeightRange range) {
  const bool reduce =
      range == Int8WeightRange::reduced || (range == Int8WeightRange::auto_for_cpu && !cpu_int8_dot_is_exact());
  return reduce ? std::min(requested, 7) : requested;
}

}  // namespace lathe
