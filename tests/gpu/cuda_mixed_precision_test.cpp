// Parity of the CUDA backend's mixed-precision matmuls and convolutions (bf16 / f16 operands, f32
// accumulation, f32 results; cuBLAS GemmEx with tensor-core padding, cuDNN pseudo-half) with
// ReferenceBackend in f64 on the same rounded operands. Shapes off the multiples of 8 exercise the
// zero padding. Linear results are f32 sums of exact products (f32 tolerance); cuDNN writes its
// output in bf16/f16 before we widen it, so conv results carry one rounding at that precision.
// Skips per precision where the device lacks the tensor cores (f16: sm_70, bf16: sm_80).
#ifdef LATHE_HAVE_CUDA
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::close;
using gputest::host_random;
using gputest::to_f64;

/// A host tensor of `dt` holding `t`'s values rounded to it (same shape, row-major).
Tensor rounded(const Tensor& t, DType dt) {
  Tensor r = Tensor::empty(t.shape(), dt);
  for (int64_t i = 0; i < t.numel(); ++i)
    r.set_flat(i, t.at_flat(i));
  return r;
}

/// One rounding of a result to `dt` (relative): 2^-8 for bf16, 2^-11 for f16.
double one_rounding(DType dt) { return dt == DType::bf16 ? 0x1p-8 : 0x1p-11; }

class CudaMixedPrecision : public gputest::CudaTest, public ::testing::WithParamInterface<DType> {
 protected:
  void SetUp() override {
    gputest::CudaTest::SetUp();
    if (IsSkipped())
      return;
    if (!gpu().supports(Op::linear, GetParam()) || !gpu().supports(Op::conv2d, GetParam()))
      GTEST_SKIP() << gpu().device_name() << " has no " << dtype_name(GetParam())
                   << " tensor cores (f16 needs sm_70, bf16 sm_80): emulated there";
  }
  /// Random host values rounded to the precision under test, then uploaded in `format`.
  Tensor operand(const Shape& s, Rng& rng, Tensor& host, MemoryFormat format = MemoryFormat::contiguous) {
    host = rounded(host_random(s, rng), GetParam());
    return up(host, format);
  }
};

TEST_P(CudaMixedPrecision, LinearMatchesReferenceIncludingPaddedShapes) {
  Rng rng(gputest::base_seed() + 40);
  struct Dims {
    int64_t n, k, o;
  };
  for (const Dims d : {Dims{64, 128, 32}, Dims{37, 70, 10}, Dims{128, 784, 512}, Dims{5, 3, 1}}) {
    SCOPED_TRACE("N=" + std::to_string(d.n) + " K=" + std::to_string(d.k) + " O=" + std::to_string(d.o));
    Tensor x, w, dy;
    const Tensor gx = operand({d.n, d.k}, rng, x), gw = operand({d.o, d.k}, rng, w), gdy = operand({d.n, d.o}, rng, dy);
    const Tensor b = host_random({d.o}, rng), b64 = to_f64(b), gb = up(b);
    Tensor want = Tensor::empty({d.n, d.o}, DType::f64);
    m_ref.linear_forward(to_f64(x), to_f64(w), &b64, want, PostOp::relu);
    Tensor y = poisoned({d.n, d.o});
    gpu().linear_forward(gx, gw, &gb, y, PostOp::relu);
    EXPECT_TRUE(close(down(y), want, 1e-5));

    Tensor want_dx = Tensor::empty({d.n, d.k}, DType::f64), want_dw = Tensor::empty({d.o, d.k}, DType::f64);
    Tensor want_db = Tensor::empty({d.o}, DType::f64);
    m_ref.linear_backward_data(to_f64(dy), to_f64(w), want_dx);
    m_ref.linear_backward_weights(to_f64(x), to_f64(dy), want_dw, &want_db);
    Tensor gdx = poisoned({d.n, d.k}), gdw = poisoned({d.o, d.k}), gdb = poisoned({d.o});
    gpu().linear_backward_data(gdy, gw, gdx);
    gpu().linear_backward_weights(gx, gdy, gdw, &gdb);
    EXPECT_TRUE(close(down(gdx), want_dx, 1e-5));
    EXPECT_TRUE(close(down(gdw), want_dw, 1e-5));
    EXPECT_TRUE(close(down(gdb), want_db, 1e-5));
  }
}

TEST_P(CudaMixedPrecision, ConvMatchesReferenceInBothLayouts) {
  Rng rng(gputest::base_seed() + 41);
  struct Dims {
    int64_t n, c, h, o;
  };
  const double rel = 2 * one_rounding(GetParam());
  for (const MemoryFormat f : {MemoryFormat::channels_last, MemoryFormat::contiguous})
    for (const Dims d : {Dims{4, 1, 28, 32}, Dims{3, 16, 9, 32}, Dims{2, 3, 7, 5}}) {
      SCOPED_TRACE(std::string(gputest::format_name(f)) + " N=" + std::to_string(d.n) + " C=" + std::to_string(d.c) +
                   " H=" + std::to_string(d.h) + " O=" + std::to_string(d.o));
      const ConvParams p{1, 1, 1, 1};
      Tensor x, w, dy;
      const Tensor gx = operand({d.n, d.c, d.h, d.h}, rng, x, f), gw = operand({d.o, d.c, 3, 3}, rng, w),
                   gdy = operand({d.n, d.o, d.h, d.h}, rng, dy, f);
      const Tensor b = host_random({d.o}, rng), b64 = to_f64(b), gb = up(b);
      Tensor want = Tensor::empty({d.n, d.o, d.h, d.h}, DType::f64);
      m_ref.conv2d_forward(p, to_f64(x), to_f64(w), &b64, want, PostOp::relu);
      Tensor y = poisoned({d.n, d.o, d.h, d.h}, f);
      gpu().conv2d_forward(p, gx, gw, &gb, y, PostOp::relu);
      EXPECT_TRUE(close(down(y), want, rel));

      Tensor want_dx = Tensor::empty({d.n, d.c, d.h, d.h}, DType::f64);
      Tensor want_dw = Tensor::empty({d.o, d.c, 3, 3}, DType::f64), want_db = Tensor::empty({d.o}, DType::f64);
      m_ref.conv2d_backward_data(p, to_f64(dy), to_f64(w), want_dx);
      m_ref.conv2d_backward_weights(p, to_f64(x), to_f64(dy), want_dw, &want_db);
      Tensor gdx = poisoned({d.n, d.c, d.h, d.h}, f), gdw = poisoned({d.o, d.c, 3, 3}), gdb = poisoned({d.o});
      gpu().conv2d_backward_data(p, gdy, gw, gdx);
      gpu().conv2d_backward_weights(p, gx, gdy, gdw, &gdb);
      EXPECT_TRUE(close(down(gdx), want_dx, rel));
      EXPECT_TRUE(close(down(gdw), want_dw, rel));
      EXPECT_TRUE(close(down(gdb), want_db, 1e-5));  // summed in f32 from the exact bf16/f16 gradient
    }
}

TEST_P(CudaMixedPrecision, RejectsOperandsOfTwoPrecisions) {
  Rng rng(gputest::base_seed() + 42);
  Tensor x;
  const Tensor gx = operand({4, 8}, rng, x);
  const Tensor w32 = up(host_random({8, 8}, rng));
  Tensor y = poisoned({4, 8});
  EXPECT_THROW(gpu().linear_forward(gx, w32, nullptr, y, PostOp::none), Error);
}

INSTANTIATE_TEST_SUITE_P(Precisions, CudaMixedPrecision, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

}  // namespace
}  // namespace lathe
#endif  // LATHE_HAVE_CUDA
