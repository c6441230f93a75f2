// bf16/f16 rounding of every implementation (the dtype.h scalar conversions, the vectorised and
// F16C CPU loops, each backend's round_to_precision and the Backend default through reorders)
// against an independent nearest-value search: round to nearest even, subnormals, inf, NaN.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/round_kernels.h"
#include "engine/core/half_arrays.h"
#include "tests/precision/rounding_reference.h"

namespace lathe {
namespace {

using test::reference_round_bf16;
using test::reference_round_f16;
using test::same_float;

const std::vector<float>& probes() {
  static const std::vector<float> v = test::rounding_probe_values(7, 20000);
  return v;
}

/// A backend that keeps Backend's default round_to_precision (two reorders through bf16/f16).
class DefaultRoundingBackend : public ReferenceBackend {
 public:
  void round_to_precision(const Tensor& src, Tensor& dst, DType precision) override {
    Backend::round_to_precision(src, dst, precision);
  }
};

TEST(ReferenceRounding, KnownValues) {
  // Hand-checked anchors for the reference itself.
  EXPECT_EQ(reference_round_f16(1.f + 0x1p-11f), 1.f);
  EXPECT_EQ(reference_round_f16(1.f + 3 * 0x1p-11f), 1.f + 0x1p-9f);
  EXPECT_EQ(reference_round_f16(0x1p-25f), 0.f);
  EXPECT_EQ(reference_round_f16(3 * 0x1p-25f), 0x1p-23f);
  EXPECT_EQ(reference_round_f16(65519.f), 65504.f);
  EXPECT_TRUE(std::isinf(reference_round_f16(65520.f)));
  EXPECT_EQ(reference_round_f16(0.1f), 0.0999755859375f);
  EXPECT_EQ(reference_round_bf16(1.f + 0x1p-8f), 1.f);
  EXPECT_EQ(reference_round_bf16(1.f + 3 * 0x1p-8f), 1.f + 0x1p-6f);
  EXPECT_EQ(reference_round_bf16(0.1f), 0.10009765625f);
  EXPECT_TRUE(std::isinf(reference_round_bf16(test::float_from_bits(0x7f7f8000u))));
}

TEST(Rounding, ScalarConversionsMatchReference) {
  for (float x : probes()) {
    ASSERT_TRUE(same_float(bf16_to_f32(f32_to_bf16(x)), reference_round_bf16(x))) << "bf16 of " << x;
    ASSERT_TRUE(same_float(f16_to_f32(f32_to_f16(x)), reference_round_f16(x))) << "f16 of " << x;
  }
}

TEST(Rounding, CpuLoopsMatchReference) {
  const std::vector<float>& x = probes();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> bf(n), h(n), hs(n);
  cpu::round_to_bf16(x.data(), bf.data(), n);
  cpu::round_to_f16(x.data(), h.data(), n);
  cpu::round_to_f16_scalar(x.data(), hs.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(same_float(bf[i], reference_round_bf16(x[i]))) << "bf16 of " << x[i];
    ASSERT_TRUE(same_float(h[i], reference_round_f16(x[i])))
        << "f16 of " << x[i] << (cpu_has_f16c() ? " (F16C path)" : " (scalar path)");
    ASSERT_TRUE(same_float(hs[i], reference_round_f16(x[i]))) << "f16 (scalar) of " << x[i];
  }
  // In place, and at a length that is not a multiple of the vector width.
  std::vector<float> y(x.begin(), x.begin() + 1001);
  cpu::round_to_f16(y.data(), y.data(), 1001);
  for (int64_t i = 0; i < 1001; ++i)
    ASSERT_TRUE(same_float(y[i], reference_round_f16(x[i]))) << "in-place f16 of " << x[i];
}

void check_backend(Backend& be, MemoryFormat src_fmt, MemoryFormat dst_fmt) {
  const std::vector<float>& x = probes();
  const int64_t n = static_cast<int64_t>(x.size()) / 4 * 4;  // as [n/4, 2, 2, 1] images
  const Shape shape{n / 4, 1, 2, 2};
  Tensor src = Tensor::empty(shape, DType::f32, Device::cpu(), src_fmt);
  for (int64_t i = 0; i < n; ++i)
    src.set_flat(i, x[i]);
  for (DType p : {DType::bf16, DType::f16}) {
    Tensor dst = Tensor::empty(shape, DType::f32, Device::cpu(), dst_fmt);
    be.round_to_precision(src, dst, p);
    for (int64_t i = 0; i < n; ++i) {
      const float want = p == DType::bf16 ? reference_round_bf16(x[i]) : reference_round_f16(x[i]);
      ASSERT_TRUE(same_float(static_cast<float>(dst.at_flat(i)), want))
          << be.name() << " " << dtype_name(p) << " of " << x[i];
    }
  }
}

TEST(Rounding, BackendsMatchReference) {
  ReferenceBackend ref;
  DnnlBackend cpu;
  DefaultRoundingBackend dflt;
  for (Backend* be : std::vector<Backend*>{&ref, &cpu, &dflt}) {
    SCOPED_TRACE(be->name());
    check_backend(*be, MemoryFormat::contiguous, MemoryFormat::contiguous);
    check_backend(*be, MemoryFormat::channels_last, MemoryFormat::contiguous);  // strided path
  }
}

TEST(Rounding, InPlaceOnBackend) {
  DnnlBackend cpu;
  Tensor t = Tensor::empty({3}, DType::f32);
  t.set_flat(0, 0.1);
  t.set_flat(1, 70000.0);
  t.set_flat(2, 1e-8);
  cpu.round_to_precision(t, t, DType::f16);
  EXPECT_EQ(t.at_flat(0), static_cast<double>(0.0999755859375f));
  EXPECT_TRUE(std::isinf(t.at_flat(1)));
  EXPECT_EQ(t.at_flat(2), 0.0);  // below half the smallest f16 subnormal
}

TEST(Rounding, BadCallsAreRejected) {
  DnnlBackend cpu;
  Tensor a = Tensor::empty({4}, DType::f32), b = Tensor::empty({5}, DType::f32);
  Tensor h = Tensor::empty({4}, DType::f16);
  EXPECT_THROW(cpu.round_to_precision(a, a, DType::s8), Error);
  EXPECT_THROW(cpu.round_to_precision(a, b, DType::bf16), Error);
  EXPECT_THROW(cpu.round_to_precision(a, h, DType::f16), Error);
  try {
    cpu.round_to_precision(a, a, DType::f32);
    FAIL() << "f32 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 or f16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
