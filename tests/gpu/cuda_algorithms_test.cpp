// The math paths that only the benchmark used to reach: convolutions with cudnnFind (timed algorithm
// choice, set_benchmark_conv_algos) forward and backward against the f64 reference, and TF32 tensor
// cores for GEMMs (set_allow_tf32): within TF32's rounding when on, back to f32 parity when off.
// Label gpu: skipped with the reason without a device.
#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_context.h"
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::close;
using gputest::CudaTest;
using gputest::host_random;
using gputest::to_f64;

TEST_F(CudaTest, CudnnFindChoosesAlgorithmsThatMatchTheReference) {
  Rng rng(gputest::base_seed() + 600);
  gpu().set_benchmark_conv_algos(true);
  EXPECT_TRUE(gpu().context().benchmark_conv_algos());
  const ConvParams p{1, 1, 1, 1};
  for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    SCOPED_TRACE(gputest::format_name(f));
    const Tensor x = host_random({8, 16, 14, 14}, rng),
                 w = host_random({32, 16, 3, 3}, rng, MemoryFormat::contiguous, 0.2);
    const Tensor b = host_random({32}, rng), dy = host_random({8, 32, 14, 14}, rng);
    const Tensor b64 = to_f64(b);
    Tensor want = Tensor::empty({8, 32, 14, 14}, DType::f64), want_dx = Tensor::empty(x.shape(), DType::f64),
           want_dw = Tensor::empty(w.shape(), DType::f64), want_db = Tensor::empty({32}, DType::f64);
    m_ref.conv2d_forward(p, to_f64(x), to_f64(w), &b64, want, PostOp::relu);
    m_ref.conv2d_backward_data(p, to_f64(dy), to_f64(w), want_dx);
    m_ref.conv2d_backward_weights(p, to_f64(x), to_f64(dy), want_dw, &want_db);

    const size_t cached = gpu().context().conv_algo_cache().size();
    const Tensor dx_ = up(x, f), dw_ = up(w, f), ddy = up(dy, f), db_ = up(b);
    Tensor y = poisoned(want.shape(), f), dx = poisoned(x.shape(), f), dw = poisoned(w.shape(), f), db = poisoned({32});
    gpu().conv2d_forward(p, dx_, dw_, &db_, y, PostOp::relu);
    gpu().conv2d_backward_data(p, ddy, dw_, dx);
    gpu().conv2d_backward_weights(p, dx_, ddy, dw, &db);
    EXPECT_TRUE(close(down(y), want, 1e-4));
    EXPECT_TRUE(close(down(dx), want_dx, 1e-4));
    EXPECT_TRUE(close(down(dw), want_dw, 1e-4));
    EXPECT_TRUE(close(down(db), want_db, 1e-4));
    const size_t chosen = gpu().context().conv_algo_cache().size();
    EXPECT_GE(chosen, cached + 3) << "at least one timed choice per direction";
    gpu().conv2d_forward(p, dx_, dw_, &db_, y, PostOp::relu);  // cached: no second search
    EXPECT_EQ(gpu().context().conv_algo_cache().size(), chosen);
  }
  gpu().set_benchmark_conv_algos(false);
}

TEST_F(CudaTest, Tf32GemmsStayWithinTf32RoundingAndSwitchBack) {
  Rng rng(gputest::base_seed() + 601);
  const int64_t N = 256, K = 1024, O = 256;
  const Tensor x = host_random({N, K}, rng), w = host_random({O, K}, rng, MemoryFormat::contiguous, 0.05);
  Tensor want = Tensor::empty({N, O}, DType::f64);
  m_ref.linear_forward(to_f64(x), to_f64(w), nullptr, want, PostOp::none);
  const Tensor dx = up(x), dw = up(w);
  Tensor y = poisoned({N, O});
  gpu().set_allow_tf32(true);
  EXPECT_TRUE(gpu().context().allow_tf32());
  gpu().linear_forward(dx, dw, nullptr, y);
  EXPECT_TRUE(close(down(y), want, 3e-3)) << "TF32 keeps 10 mantissa bits: ~1e-3 relative";
  gpu().set_allow_tf32(false);
  y = poisoned({N, O});
  gpu().linear_forward(dx, dw, nullptr, y);
  EXPECT_TRUE(close(down(y), want, 1e-5)) << "f32 again once TF32 is off";
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
