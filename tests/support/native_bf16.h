// Test helper: why the oneDNN backend emulates bf16 on this CPU (empty when it runs bf16 natively),
// for the tests of native bf16 kernels to skip with.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <sstream>
#include <string>

#include "engine/backend/cpu/dnnl_backend.h"

namespace lathe::test {

inline std::string no_native_bf16_reason(const DnnlBackend& cpu) {
  if (cpu.supports(Op::linear, DType::bf16) && cpu.supports(Op::conv2d, DType::bf16))
    return {};
  std::ostringstream why;
  why << "this CPU has no bf16 instructions (oneDNN effective ISA 0x" << std::hex
      << static_cast<unsigned>(dnnl::get_effective_cpu_isa())
      << "; needs avx512_core_bf16 = 0xe7 or AMX): bf16 is emulated here";
  return why.str();
}

}  // namespace lathe::test
