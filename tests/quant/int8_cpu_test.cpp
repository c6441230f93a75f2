// The INT8 weight range follows the CPU (int8_cpu.h): 7-bit weights where oneDNN's int8 dot product
// saturates (no VNNI), 8 bits where it is exact; and worst-case inputs (every u8 activation 255,
// every weight at the end of its range, same signs side by side: the pairs vpmaddubsw adds) give
// oneDNN results identical to the integer reference on every CPU.
#include <gtest/gtest.h>

#include "tests/support/int8_kernels.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

/// Weights whose per-channel max is `peak`, every entry +-peak with the sign alternating every 4
/// elements (so the adjacent pairs a 2-way s16 sum adds have equal signs).
Tensor worst_case_weights(const Shape& shape) {
  Tensor w = Tensor::empty(shape, DType::f32);
  float* p = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i)
    p[i] = (i / 4) % 2 ? -0.5f : 0.5f;
  return w;
}

Int8LayerConfig u8_config(Int8WeightRange range, bool s8_src = false) {
  Int8LayerConfig cfg;
  // u8 scale 1/255, or s8 scale 1/127 (which oneDNN shifts by +128 to u8 on CPUs without VNNI)
  cfg.src = s8_src ? make_quant_params(-1.0, 1.0, 8, true, true) : make_quant_params(0.0, 1.0, 8, true, false);
  cfg.weight_range = range;
  return cfg;  // f32 output: no saturation at the end hides an accumulator error
}

Tensor all_ones(const Shape& shape, MemoryFormat f) {
  Tensor x = Tensor::empty(shape, DType::f32, Device::cpu(), f);
  float* p = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i)
    p[i] = 1.0f;  // quantizes to 255
  return x;
}

/// An odd-looking bias so that bias_acc is not a round number (catches bias scaling mistakes).
Tensor test_bias(int64_t n) {
  Tensor b = Tensor::empty({n}, DType::f32);
  for (int64_t i = 0; i < n; ++i)
    b.data<float>()[i] = 0.1234567f * static_cast<float>(i) - 0.377f;
  return b;
}

using test::Int8Conv2d;
using test::Int8Linear;
using test::mismatches;

TEST(Int8Cpu, WeightBitsFollowTheCpu) {
  const bool exact = cpu_int8_dot_is_exact();
  RecordProperty("isa", cpu_int8_isa_name());
  EXPECT_EQ(effective_weight_bits(8), exact ? 8 : 7) << cpu_int8_isa_name();
  EXPECT_EQ(effective_weight_bits(8, Int8WeightRange::full), 8);
  EXPECT_EQ(effective_weight_bits(8, Int8WeightRange::reduced), 7);
  EXPECT_EQ(effective_weight_bits(4, Int8WeightRange::reduced), 4);
  const Tensor w = worst_case_weights({3, 8});
  Int8Linear lin(w, nullptr, u8_config(Int8WeightRange::auto_for_cpu));
  EXPECT_EQ(lin.layer().weights.bits, exact ? 8 : 7);
  EXPECT_EQ(lin.layer().weights.qmax(), exact ? 127 : 63);
  // Every weight is +-peak, so it quantizes to +-qmax.
  for (int64_t i = 0; i < 24; ++i)
    ASSERT_EQ(std::abs(lin.layer().weights_q.at_flat(i)), lin.layer().weights.qmax());
}

TEST(Int8Cpu, WorstCaseInputsMatchReferenceExactly) {
  const Tensor bias = test_bias(8);
  for (Int8WeightRange range : {Int8WeightRange::auto_for_cpu, Int8WeightRange::reduced})
    for (bool s8_src : {false, true}) {
      Int8Linear lin(worst_case_weights({5, 256}), nullptr, u8_config(range, s8_src));
      const Tensor xq = quantize(all_ones({4, 256}, MemoryFormat::contiguous), lin.src_params());
      EXPECT_EQ(mismatches(lin.forward(xq), lin.forward_reference(xq)), 0) << lin.implementation();
      Int8Conv2d conv({1, 1, 1, 1}, worst_case_weights({8, 32, 3, 3}), &bias, u8_config(range, s8_src));
      const Tensor cq = quantize(all_ones({2, 32, 6, 6}, MemoryFormat::channels_last), conv.src_params());
      EXPECT_EQ(mismatches(conv.forward(cq), conv.forward_reference(cq)), 0) << conv.implementation();
    }
}

// Shows the bug the reduced range fixes is real: full 8-bit weights saturate on such CPUs.
TEST(Int8Cpu, FullRangeSaturatesWithoutVnni) {
  if (cpu_int8_dot_is_exact())
    GTEST_SKIP() << "CPU int8 dot product is exact here (" << cpu_int8_isa_name() << "): nothing saturates";
  Int8Linear lin(worst_case_weights({5, 256}), nullptr, u8_config(Int8WeightRange::full));
  const Tensor xq = quantize(all_ones({4, 256}, MemoryFormat::contiguous), lin.src_params());
  EXPECT_GT(mismatches(lin.forward(xq), lin.forward_reference(xq)), 0)
      << lin.implementation() << " did not saturate: the reduced range may be unnecessary on " << cpu_int8_isa_name();
}

}  // namespace
}  // namespace lathe
