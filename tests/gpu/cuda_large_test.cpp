// Sizes that wrap the kernels' grid-stride loops, one case per kernel family in kernels/: the grids
// are capped (detail::kMaxBlocks = 8192 blocks of 256 threads, 2^21 threads; 65535 rows of grid.y for
// bias_act and batch norm inference; 8192 blocks of 8 warps for softmax rows; 1024 blocks for
// reductions), so every thread here runs its loop more than once. Plus views at odd element offsets,
// which the vectorized (float4) kernels must take through their scalar path. Each case stays well
// under 1 GiB of device memory. Label gpu: skipped with the reason without a device.
#ifdef LATHE_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "kernels/dropout.cuh"
#include "kernels/int8_pool.cuh"
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::close;
using gputest::CudaTest;

constexpr int64_t kGridThreads = 8192 * 256;          // detail::kMaxBlocks * detail::kBlock
constexpr int64_t kLarge = 2 * 4 * kGridThreads + 7;  // float4 loops run twice, and a scalar tail
constexpr int64_t kManyRows = 70000;                  // > 65535 grid rows, > 8192 * 8 softmax warps

/// A host f32 tensor of uniform values in [lo, hi), filled fast (no per-element dispatch).
Tensor host_uniform(const Shape& shape, Rng& rng, double lo = -1, double hi = 1) {
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = static_cast<float>(rng.uniform(lo, hi));
  return t;
}

/// Elements where got and want differ by more than rel * max(1, |want|), NaN counting as different.
int64_t far_apart(const float* got, const float* want, int64_t n, double rel) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got[i], w = want[i];
    if (!(std::abs(g - w) <= rel * std::max(1.0, std::abs(w))))
      ++bad;
  }
  return bad;
}

class CudaLargeTest : public CudaTest {};

// ---------------------------------------------------------------- elementwise (float4 + tail)
TEST_F(CudaLargeTest, ElementwiseWrapsTheGrid) {
  Rng rng(gputest::base_seed() + 300);
  const Tensor a = host_uniform({kLarge}, rng), b = host_uniform({kLarge}, rng);
  const Tensor da = up(a), db = up(b);
  Tensor y = gpu().empty({kLarge}, DType::f32);
  Tensor want = Tensor::empty({kLarge}, DType::f32);
  const float *pa = a.data<float>(), *pb = b.data<float>();

  gpu().add(da, db, y);
  for (int64_t i = 0; i < kLarge; ++i)
    want.data<float>()[i] = pa[i] + pb[i];
  EXPECT_EQ(far_apart(down(y).data<float>(), want.data<float>(), kLarge, 0), 0);

  gpu().relu_forward(da, y);
  for (int64_t i = 0; i < kLarge; ++i)
    want.data<float>()[i] = std::max(pa[i], 0.0f);
  EXPECT_EQ(far_apart(down(y).data<float>(), want.data<float>(), kLarge, 0), 0);

  gpu().copy(db, y);
  gpu().axpy(0.5, da, y);  // y = 0.5 a + b
  for (int64_t i = 0; i < kLarge; ++i)
    want.data<float>()[i] = 0.5f * pa[i] + pb[i];
  EXPECT_EQ(far_apart(down(y).data<float>(), want.data<float>(), kLarge, 1e-6), 0);
}

// ---------------------------------------------------------------- reductions
TEST_F(CudaLargeTest, ReductionsWrapTheGrid) {
  Rng rng(gputest::base_seed() + 301);
  const Tensor a = host_uniform({kLarge}, rng, -0.5, 1.0);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < kLarge; ++i) {
    const double v = a.data<float>()[i];
    s += v;
    s2 += v * v;
  }
  const Tensor da = up(a);
  EXPECT_NEAR(gpu().sum(da), s, 1e-9 * std::abs(s) + 1e-6);
  EXPECT_NEAR(gpu().sum_squares(da), s2, 1e-9 * s2);
}

// ---------------------------------------------------------------- dropout
TEST_F(CudaLargeTest, DropoutWrapsTheGrid) {
  Rng rng(gputest::base_seed() + 302);
  const Tensor x = host_uniform({kLarge}, rng, 0.5, 1.5);  // never 0, so a kept element is non-zero
  Tensor y = poisoned({kLarge}), mask = gpu().empty({kLarge}, DType::u8);
  const uint64_t seed = 77;
  gpu().dropout_forward(0.25, seed, up(x), y, mask);
  const Tensor hy = down(y), hm = down(mask);
  const uint8_t* m = static_cast<const uint8_t*>(hm.raw());
  int64_t wrong = 0;
  for (int64_t i = 0; i < kLarge; ++i) {
    const bool keep = kernels::dropout_keep(seed, i, 0.25);
    const float want = keep ? static_cast<float>(x.data<float>()[i] / 0.75) : 0.0f;
    wrong += (m[i] != (keep ? 1 : 0)) || std::abs(hy.data<float>()[i] - want) > 1e-6f * std::abs(want);
  }
  EXPECT_EQ(wrong, 0);
}

// ---------------------------------------------------------------- optimizers
TEST_F(CudaLargeTest, SgdWrapsTheGrid) {
  Rng rng(gputest::base_seed() + 303);
  const Tensor w = host_uniform({kLarge}, rng), g = host_uniform({kLarge}, rng);
  Tensor dw = up(w), buf;
  SgdParams p;
  p.lr = 0.125;
  gpu().sgd_update(p, dw, up(g), buf);
  Tensor want = Tensor::empty({kLarge}, DType::f32);
  for (int64_t i = 0; i < kLarge; ++i)
    want.data<float>()[i] = static_cast<float>(w.data<float>()[i] - 0.125 * g.data<float>()[i]);
  EXPECT_EQ(far_apart(down(dw).data<float>(), want.data<float>(), kLarge, 1e-6), 0);
}

// ---------------------------------------------------------------- reorder (strided copy, convert)
TEST_F(CudaLargeTest, ReorderAndConvertWrapTheGrid) {
  Rng rng(gputest::base_seed() + 304);
  const Shape shape{8, 64, 160, 129};  // 10.6 M elements, odd width
  const Tensor x = host_uniform(shape, rng);
  const Tensor nchw = up(x);
  Tensor nhwc = gpu().empty(shape, DType::f32, MemoryFormat::channels_last);
  gpu().copy(nchw, nhwc);  // strided copy on the device
  const Tensor back = down(nhwc);
  EXPECT_EQ(std::memcmp(back.raw(), x.raw(), x.nbytes()), 0);

  Tensor low = gpu().empty(shape, DType::bf16);
  gpu().reorder(nhwc, low);  // convert + relayout
  const Tensor got = down(low);
  const uint16_t* bits = static_cast<const uint16_t*>(got.raw());
  int64_t wrong = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    wrong += bits[i] != f32_to_bf16(x.data<float>()[i]);
  EXPECT_EQ(wrong, 0);
}

// ---------------------------------------------------------------- max pooling
TEST_F(CudaLargeTest, MaxPoolWrapsTheGrid) {
  Rng rng(gputest::base_seed() + 305);
  const Shape shape{32, 64, 64, 80};  // 2.6 M outputs > 2^21 threads
  const Tensor x = host_uniform(shape, rng);
  const PoolParams pp{2, 2, 2, 2, 0, 0};
  const Shape out{32, 64, 32, 40};
  Tensor y = poisoned(out), ws;
  gpu().maxpool2d_forward(pp, up(x), y, ws);
  const Tensor got = down(y);
  int64_t wrong = 0;
  const float* px = x.data<float>();
  const float* py = got.data<float>();
  for (int64_t p = 0; p < 32 * 64; ++p)
    for (int64_t i = 0; i < 32; ++i)
      for (int64_t j = 0; j < 40; ++j) {
        const float* base = px + (p * 64 + 2 * i) * 80 + 2 * j;
        const float want = std::max({base[0], base[1], base[80], base[81]});
        wrong += py[(p * 32 + i) * 40 + j] != want;
      }
  EXPECT_EQ(wrong, 0);
}

// ---------------------------------------------------------------- batch norm
TEST_F(CudaLargeTest, BatchNormWrapsTheGrid) {
  Rng rng(gputest::base_seed() + 306);
  const int64_t N = 1024, C = 80, H = 4, W = 4;  // 81920 planes > 65535 grid rows
  const Tensor x = host_uniform({N, C, H, W}, rng, -2, 3);
  const Tensor g = host_uniform({C}, rng, 0.5, 1.5), b = host_uniform({C}, rng);
  const Tensor rm = host_uniform({C}, rng), rv = host_uniform({C}, rng, 0.5, 2);
  const BatchNormParams p;
  Tensor y = poisoned({N, C, H, W});
  gpu().batchnorm_forward_inference(p, up(x), up(g), up(b), up(rm), up(rv), y);
  const Tensor got = down(y);
  Tensor want = Tensor::empty({N, C, H, W}, DType::f32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const double inv = 1.0 / std::sqrt(rv.data<float>()[c] + p.eps);
      for (int64_t k = 0; k < H * W; ++k) {
        const int64_t i = (n * C + c) * H * W + k;
        want.data<float>()[i] = static_cast<float>(
            (x.data<float>()[i] - rm.data<float>()[c]) * inv * g.data<float>()[c] + b.data<float>()[c]);
      }
    }
  EXPECT_EQ(far_apart(got.data<float>(), want.data<float>(), got.numel(), 1e-5), 0);

  // Training: one block per channel loops over N * H * W = 16384 elements.
  Tensor mean = gpu().empty({C}, DType::f32), invstd = gpu().empty({C}, DType::f32);
  Tensor run_m = up(rm), run_v = up(rv);
  gpu().batchnorm_forward_training(p, up(x), up(g), up(b), y, mean, invstd, run_m, run_v);
  const Tensor hm = down(mean);
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < H * W; ++k)
        s += x.data<float>()[(n * C + c) * H * W + k];
    EXPECT_NEAR(hm.data<float>()[c], s / (N * H * W), 1e-5) << "channel " << c;
  }
}

// ---------------------------------------------------------------- bias + activation (after cuBLAS)
TEST_F(CudaLargeTest, LinearBiasReluWrapsTheGridRows) {
  Rng rng(gputest::base_seed() + 307);
  const int64_t N = kManyRows, K = 8, O = 16;
  const Tensor x = host_uniform({N, K}, rng), w = host_uniform({O, K}, rng), b = host_uniform({O}, rng);
  Tensor y = poisoned({N, O});
  const Tensor dbias = up(b);
  gpu().linear_forward(up(x), up(w), &dbias, y, PostOp::relu);
  const Tensor got = down(y);
  Tensor want = Tensor::empty({N, O}, DType::f32);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double s = b.data<float>()[o];
      for (int64_t k = 0; k < K; ++k)
        s += double(x.data<float>()[n * K + k]) * w.data<float>()[o * K + k];
      want.data<float>()[n * O + o] = static_cast<float>(std::max(s, 0.0));
    }
  EXPECT_EQ(far_apart(got.data<float>(), want.data<float>(), got.numel(), 1e-5), 0);
}

// ---------------------------------------------------------------- softmax cross-entropy
TEST_F(CudaLargeTest, SoftmaxCrossEntropyWrapsTheGridRows) {
  Rng rng(gputest::base_seed() + 308);
  const int64_t N = kManyRows, C = 10;
  const Tensor z = gputest::host_random({N, C}, rng, MemoryFormat::contiguous, 3.0);
  Tensor labels = Tensor::empty({N}, DType::s32);
  for (int64_t i = 0; i < N; ++i)
    labels.data<int32_t>()[i] = static_cast<int32_t>(rng.below(C));
  Tensor want_g = Tensor::empty({N, C}, DType::f64);
  const LossResult want = m_ref.softmax_cross_entropy(gputest::to_f64(z), labels, &want_g, 1.0 / N);
  Tensor g = poisoned({N, C});
  const LossResult got = gpu().softmax_cross_entropy(up(z), up(labels), &g, 1.0 / N);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::max(1.0, std::abs(want.loss_sum)));
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_TRUE(close(down(g), want_g, 1e-5));
}

// ---------------------------------------------------------------- 8-bit pooling / ReLU
TEST_F(CudaLargeTest, Int8ReluWrapsTheGrid) {
  Rng rng(gputest::base_seed() + 309);
  Tensor q = Tensor::empty({kLarge}, DType::u8);
  uint8_t* p = static_cast<uint8_t*>(q.raw());
  for (int64_t i = 0; i < kLarge; ++i)
    p[i] = static_cast<uint8_t>(rng.below(256));
  Tensor dq = up(q);
  LATHE_CUDA_CHECK(kernels::int8_relu(gpu().context().stream(), dq.raw(), false, kLarge, 100));
  const Tensor got = down(dq);
  const uint8_t* g = static_cast<const uint8_t*>(got.raw());
  int64_t wrong = 0;
  for (int64_t i = 0; i < kLarge; ++i)
    wrong += g[i] != std::max<uint8_t>(p[i], 100);
  EXPECT_EQ(wrong, 0);
}

// ---------------------------------------------------------------- unaligned views (scalar paths)
TEST_F(CudaLargeTest, VectorizedKernelsTakeViewsAtOddOffsets) {
  Rng rng(gputest::base_seed() + 310);
  const int64_t n = 4 * 1000 + 3;
  const Tensor a = host_uniform({n + 1}, rng), b = host_uniform({n + 3}, rng);
  const Tensor da = up(a), db = up(b);
  // Views starting 4 and 12 bytes into their blocks: not 16-byte aligned, so no float4 loads.
  const Tensor va = da.slice0(1, n + 1), vb = db.slice0(3, n + 3);
  ASSERT_NE(reinterpret_cast<uintptr_t>(va.raw()) % 16, 0u);
  ASSERT_NE(reinterpret_cast<uintptr_t>(vb.raw()) % 16, 0u);
  Tensor dst_block = poisoned({n + 1});
  Tensor vd = dst_block.slice0(1, n + 1);
  const float *pa = a.data<float>() + 1, *pb = b.data<float>() + 3;

  gpu().add(va, vb, vd);
  Tensor got = down(dst_block);
  EXPECT_TRUE(std::isnan(got.data<float>()[0])) << "the element before the view was written";
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += got.data<float>()[i + 1] != pa[i] + pb[i];
  EXPECT_EQ(wrong, 0);

  // One aligned and one unaligned operand, in place on the unaligned one.
  const Tensor aligned = da.slice0(0, n);
  gpu().axpy(2.0, aligned, vd);  // vd = 2 a[0..n) + (a[1..] + b[3..])
  got = down(dst_block);
  wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += std::abs(got.data<float>()[i + 1] - (2.0f * a.data<float>()[i] + (pa[i] + pb[i]))) > 1e-5f;
  EXPECT_EQ(wrong, 0);

  gpu().relu_forward(vb, vd);
  got = down(dst_block);
  wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += got.data<float>()[i + 1] != std::max(pb[i], 0.0f);
  EXPECT_EQ(wrong, 0);

  double s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += pa[i];
  EXPECT_NEAR(gpu().sum(va), s, 1e-9 * std::abs(s) + 1e-9);
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
