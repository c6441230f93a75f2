// What the CPU's INT8 dot product can do exactly, and the weight range INT8 layers quantize to.
//
// oneDNN's x86 int8 kernels multiply u8 activations by s8 weights. With VNNI (AVX512-VNNI, which
// AMX CPUs also have) that is vpdpbusd: four u8 x s8 products summed straight into s32, exact.
// Without it (AVX2, AVX-512 without VNNI, SSE4.1) they use vpmaddubsw, which adds two adjacent
// u8 x s8 products into a *saturating* s16: 255 x 127 x 2 = 64770 overflows 32767, so results
// differ from the integer arithmetic (oneDNN "Nuances of int8 computations"). s8 activations go
// through the same instruction after a +128 shift to u8 (with a compensation term), so they are
// affected alike.
//
// The fix, as oneDNN recommends for such CPUs: the *weights* lose one bit (7-bit symmetric,
// -63..63, per output channel), so every pair stays within 255 x 63 x 2 = 32130 < 32767 and the
// kernel is exact again. Activations keep all 8 bits (PyTorch fbgemm's reduce_range takes the bit
// from the activations instead; per-channel weights lose less from the bit than per-tensor
// activations do). The integer reference quantizes the same 7-bit weights, so parity stays bit-exact.
// On VNNI/AMX CPUs the weights use the full 8 bits.
#pragma once

#include <string>

#include "engine/backend/formats/int8_layer_data.h"

namespace lathe {

/// True when oneDNN's effective ISA has an exact u8 x s8 -> s32 dot product (AVX512-VNNI or AMX),
/// from dnnl::get_effective_cpu_isa() (so DNNL_MAX_CPU_ISA limits are honoured). AVX2-VNNI is
/// treated as not exact: oneDNN 2.6 does not use it for every int8 kernel.
bool cpu_int8_dot_is_exact();

/// oneDNN's effective ISA by name ("avx2", "avx512_core_vnni", ...), for logs and reports.
std::string cpu_int8_isa_name();

/// The weight bits a layer uses for `requested` bits under `range`: min(requested, 7) when the
/// range is reduced (or auto on a CPU without an exact dot product), else `requested`.
int effective_weight_bits(int requested, Int8WeightRange range = Int8WeightRange::auto_for_cpu);

}  // namespace lathe
