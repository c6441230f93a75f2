// Parity of the CUDA backend's kernel-backed ops with ReferenceBackend: elementwise (mixed layouts,
// in place, odd sizes), batch norm (NCHW and NHWC), dropout (statistics and the masked relationship,
// since its mask comes from a counter hash, not the reference's Rng stream), softmax cross-entropy,
// SGD / AdamW over several steps, and the double-accumulated reductions.
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include <cmath>

#include "kernels/dropout.cuh"
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::close;
using gputest::CudaTest;
using gputest::host_random;
using gputest::to_f64;

constexpr MemoryFormat kNCHW = MemoryFormat::contiguous;
constexpr MemoryFormat kNHWC = MemoryFormat::channels_last;

// ---------------------------------------------------------------- no device needed
TEST(DropoutHash, KeepsAboutOneMinusPAndIsDeterministic) {
  const int64_t n = 200000;
  for (double p : {0.0, 0.1, 0.5, 0.9}) {
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i)
      kept += kernels::dropout_keep(42, i, p);
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(kept), n * (1 - p), 5 * sigma + 1e-9) << "p " << p;
  }
  EXPECT_EQ(kernels::dropout_keep(7, 123, 0.5), kernels::dropout_keep(7, 123, 0.5));
  int64_t same = 0;
  for (int64_t i = 0; i < 1000; ++i)
    same += kernels::dropout_keep(1, i, 0.5) == kernels::dropout_keep(2, i, 0.5);
  EXPECT_LT(same, 600);  // another seed gives another mask
}

// ---------------------------------------------------------------- elementwise
TEST_F(CudaTest, ElementwiseOpsMatchReferenceInAnyLayout) {
  Rng rng(gputest::base_seed() + 40);
  const Shape shapes[] = {{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 16, 9, 9}, {1, 3, 1, 4097}};
  for (const Shape& s : shapes)
    for (int combo = 0; combo < 4; ++combo) {
      const MemoryFormat fa = combo & 1 ? kNHWC : kNCHW, fd = combo & 2 ? kNHWC : kNCHW;
      SCOPED_TRACE(shape_str(s) + " " + gputest::format_name(fa) + "->" + gputest::format_name(fd));
      const Tensor a = host_random(s, rng), b = host_random(s, rng), d0 = host_random(s, rng);
      const Tensor a64 = to_f64(a), b64 = to_f64(b);
      Tensor want = Tensor::empty(s, DType::f64);
      const Tensor da = up(a, fa), db = up(b, fd);

      m_ref.relu_forward(a64, want);
      Tensor y = poisoned(s, fd);
      gpu().relu_forward(da, y);
      EXPECT_TRUE(close(down(y), want, 0));

      m_ref.relu_backward(a64, b64, want);
      gpu().relu_backward(da, db, y);
      EXPECT_TRUE(close(down(y), want, 0));

      m_ref.add(a64, b64, want);
      gpu().add(da, db, y);
      EXPECT_TRUE(close(down(y), want, 1e-7));

      // axpy and scale read their destination; float arithmetic like the reference's f32 path.
      Tensor want32 = d0.contiguous_copy();
      m_ref.axpy(-0.75, a, want32);
      Tensor d = up(d0, fd);
      gpu().axpy(-0.75, da, d);
      EXPECT_TRUE(close(down(d), want32, 1e-6));
      m_ref.scale(want32, 1.5);
      gpu().scale(d, 1.5);
      EXPECT_TRUE(close(down(d), want32, 1e-6));
    }
}

TEST_F(CudaTest, ElementwiseInPlace) {
  Rng rng(gputest::base_seed() + 41);
  const Tensor a = host_random({1001}, rng);
  Tensor want = to_f64(a);
  m_ref.relu_forward(want, want);
  Tensor d = up(a);
  gpu().relu_forward(d, d);
  EXPECT_TRUE(close(down(d), want, 0));
  Tensor want2 = to_f64(a);
  m_ref.add(want2, want2, want2);
  Tensor e = up(a);
  gpu().add(e, e, e);
  EXPECT_TRUE(close(down(e), want2, 0));
}

// ---------------------------------------------------------------- batch norm
TEST_F(CudaTest, BatchNormMatchesReference) {
  Rng rng(gputest::base_seed() + 50);
  const Shape shapes[] = {{4, 3, 5, 7}, {2, 16, 9, 9}, {1, 5, 1, 3}};
  const BatchNormParams p{1e-5, 0.1};
  for (const Shape& s : shapes)
    for (MemoryFormat f : {kNCHW, kNHWC}) {
      SCOPED_TRACE(shape_str(s) + " " + gputest::format_name(f));
      const int64_t C = s[1];
      const Tensor x = host_random(s, rng, kNCHW, 3.0), g = host_random({C}, rng), b = host_random({C}, rng);
      const Tensor rm0 = host_random({C}, rng), rv1 = host_random({C}, rng);
      Tensor rv0 = rv1.contiguous_copy();
      for (int64_t c = 0; c < C; ++c)
        rv0.set({c}, 1.0 + std::abs(rv1.get({c})));
      const Tensor dy = host_random(s, rng);

      Tensor y64 = Tensor::empty(s, DType::f64), m64 = Tensor::empty({C}, DType::f64), is64 = m64.contiguous_copy();
      Tensor rm64 = to_f64(rm0), rv64 = to_f64(rv0);
      m_ref.batchnorm_forward_training(p, to_f64(x), to_f64(g), to_f64(b), y64, m64, is64, rm64, rv64);
      Tensor dx64 = Tensor::empty(s, DType::f64), dg64 = Tensor::empty({C}, DType::f64), db64 = dg64.contiguous_copy();
      m_ref.batchnorm_backward(to_f64(x), to_f64(dy), to_f64(g), m64, is64, dx64, dg64, db64);
      Tensor yi64 = Tensor::empty(s, DType::f64);
      m_ref.batchnorm_forward_inference(p, to_f64(x), to_f64(g), to_f64(b), to_f64(rm0), to_f64(rv0), yi64);

      const Tensor dx_ = up(x, f), dg = up(g), dbeta = up(b);
      Tensor y = poisoned(s, f), mean = poisoned({C}), invstd = poisoned({C}), rm = up(rm0), rv = up(rv0);
      gpu().batchnorm_forward_training(p, dx_, dg, dbeta, y, mean, invstd, rm, rv);
      EXPECT_TRUE(close(down(y), y64, 1e-5));
      EXPECT_TRUE(close(down(mean), m64, 1e-6));
      EXPECT_TRUE(close(down(invstd), is64, 1e-6));
      EXPECT_TRUE(close(down(rm), rm64, 1e-6));
      EXPECT_TRUE(close(down(rv), rv64, 1e-6));

      Tensor dx = poisoned(s, f), dgamma = poisoned({C}), dbeta_out = poisoned({C});
      gpu().batchnorm_backward(dx_, up(dy, f), dg, mean, invstd, dx, dgamma, dbeta_out);
      EXPECT_TRUE(close(down(dx), dx64, 1e-4));
      EXPECT_TRUE(close(down(dgamma), dg64, 1e-5));
      EXPECT_TRUE(close(down(dbeta_out), db64, 1e-5));

      Tensor yi = poisoned(s, f);
      gpu().batchnorm_forward_inference(p, dx_, dg, dbeta, up(rm0), up(rv0), yi);
      EXPECT_TRUE(close(down(yi), yi64, 1e-6));
    }
}

// ---------------------------------------------------------------- dropout
TEST_F(CudaTest, DropoutKeepsTheRightFractionAndMasksConsistently) {
  Rng rng(gputest::base_seed() + 60);
  for (MemoryFormat f : {kNCHW, kNHWC}) {
    SCOPED_TRACE(gputest::format_name(f));
    const Shape s{8, 16, 25, 25};
    const double p = 0.3;
    const uint64_t seed = 99;
    const Tensor x = host_random(s, rng);
    Tensor y = poisoned(s, f), mask;
    gpu().dropout_forward(p, seed, up(x, f), y, mask);
    const Tensor hy = down(y), hm = down(mask);
    ASSERT_EQ(hm.dtype(), DType::u8);
    const uint8_t* m = hm.data<uint8_t>();
    int64_t kept = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_EQ(m[i], kernels::dropout_keep(seed, i, p) ? 1 : 0) << i;
      kept += m[i];
      const double want = m[i] ? static_cast<float>(x.at_flat(i) * (1.0 / (1.0 - p))) : 0.0;
      ASSERT_EQ(hy.at_flat(i), want) << i;
    }
    const double n = static_cast<double>(x.numel());
    EXPECT_NEAR(kept, n * (1 - p), 5 * std::sqrt(n * p * (1 - p)));

    const Tensor dy = host_random(s, rng);
    Tensor dx = poisoned(s, f);
    gpu().dropout_backward(p, up(dy, f), mask, dx);
    const Tensor hdx = down(dx);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double want = m[i] ? static_cast<float>(dy.at_flat(i) * (1.0 / (1.0 - p))) : 0.0;
      ASSERT_EQ(hdx.at_flat(i), want) << i;
    }
  }
  // The reference's mask differs (another generator) but has the same statistics.
  const Tensor x = Tensor::zeros({100000}, DType::f32);
  Tensor ry = Tensor::empty({100000}, DType::f32), rmask;
  m_ref.dropout_forward(0.3, 99, x, ry, rmask);
  int64_t ref_kept = 0;
  for (int64_t i = 0; i < 100000; ++i)
    ref_kept += rmask.data<uint8_t>()[i];
  EXPECT_NEAR(ref_kept, 70000, 5 * std::sqrt(100000 * 0.21));
}

// ---------------------------------------------------------------- loss
TEST_F(CudaTest, SoftmaxCrossEntropyMatchesReference) {
  Rng rng(gputest::base_seed() + 70);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t N = trial == 0 ? 128 : 1 + static_cast<int64_t>(rng.below(300));
    const int64_t C = trial == 0 ? 10 : 1 + static_cast<int64_t>(rng.below(70));
    SCOPED_TRACE("N=" + std::to_string(N) + " C=" + std::to_string(C));
    const Tensor z = host_random({N, C}, rng, kNCHW, 4.0);
    Tensor labels = Tensor::empty({N}, DType::s32);
    for (int64_t n = 0; n < N; ++n)
      labels.data<int32_t>()[n] = static_cast<int32_t>(rng.below(C));
    Tensor want_g = Tensor::empty({N, C}, DType::f64);
    const double scale = 1.0 / N;
    const LossResult want = m_ref.softmax_cross_entropy(to_f64(z), labels, &want_g, scale);
    Tensor g = poisoned({N, C});
    const LossResult got = gpu().softmax_cross_entropy(up(z), up(labels), &g, scale);
    EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-5 * std::max(1.0, std::abs(want.loss_sum)));
    EXPECT_EQ(got.correct, want.correct);
    EXPECT_TRUE(close(down(g), want_g, 1e-5));
    const LossResult no_grad = gpu().softmax_cross_entropy(up(z), up(labels), nullptr, scale);
    EXPECT_EQ(no_grad.loss_sum, got.loss_sum);  // deterministic reduction
    EXPECT_EQ(no_grad.correct, got.correct);
  }
  Tensor bad = Tensor::empty({2}, DType::s32);
  bad.data<int32_t>()[0] = 0;
  bad.data<int32_t>()[1] = 5;
  Tensor z = gpu().zeros({2, 5}, DType::f32);
  EXPECT_THROW(gpu().softmax_cross_entropy(z, up(bad), nullptr, 1.0), Error);
}

// ---------------------------------------------------------------- optimizers
TEST_F(CudaTest, SgdMatchesReferenceOverSteps) {
  Rng rng(gputest::base_seed() + 80);
  const SgdParams variants[] = {
      {0.05, 0.0, 0.0, false}, {0.02, 0.9, 0.0, false}, {0.02, 0.9, 1e-4, true}, {0.1, 0.5, 5e-4, false}};
  for (const SgdParams& p : variants) {
    SCOPED_TRACE("momentum " + std::to_string(p.momentum) + " wd " + std::to_string(p.weight_decay));
    const int64_t n = 4099;
    Tensor w = host_random({n}, rng), buf = Tensor::zeros({n}, DType::f32);
    Tensor dw = up(w), dbuf = up(buf);
    for (int step = 0; step < 5; ++step) {
      const Tensor g = host_random({n}, rng);
      m_ref.sgd_update(p, w, g, buf);
      gpu().sgd_update(p, dw, up(g), dbuf);
    }
    EXPECT_TRUE(close(down(dw), w, 1e-6));
    if (p.momentum != 0)
      EXPECT_TRUE(close(down(dbuf), buf, 1e-6));
  }
}

TEST_F(CudaTest, AdamWMatchesReferenceOverSteps) {
  Rng rng(gputest::base_seed() + 81);
  const int64_t n = 3001;
  AdamWParams p;
  p.lr = 1e-2;
  p.weight_decay = 0.05;
  Tensor w = host_random({n}, rng), m = Tensor::zeros({n}, DType::f32), v = Tensor::zeros({n}, DType::f32);
  Tensor dw = up(w), dm = up(m), dv = up(v);
  for (int step = 1; step <= 6; ++step) {
    p.step = step;
    const Tensor g = host_random({n}, rng);
    m_ref.adamw_update(p, w, g, m, v);
    gpu().adamw_update(p, dw, up(g), dm, dv);
  }
  EXPECT_TRUE(close(down(dw), w, 1e-6));
  EXPECT_TRUE(close(down(dm), m, 1e-6));
  EXPECT_TRUE(close(down(dv), v, 1e-6));
}

// ---------------------------------------------------------------- reductions
TEST_F(CudaTest, SumsAccumulateInDouble) {
  Rng rng(gputest::base_seed() + 90);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{4096}, int64_t{1000003}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const Tensor t = host_random({n}, rng);
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = t.data<float>()[i];
      s += v;
      q += v * v;
    }
    const Tensor d = up(t);
    EXPECT_NEAR(gpu().sum(d), s, 1e-9 * std::max(1.0, q));
    EXPECT_NEAR(gpu().sum_squares(d), q, 1e-12 * q);
  }
  const Tensor img = host_random({3, 5, 7, 9}, rng);
  EXPECT_NEAR(gpu().sum(up(img, kNHWC)), m_ref.sum(img), 1e-9);
  EXPECT_NEAR(gpu().sum_squares(up(img, kNHWC)), m_ref.sum_squares(img), 1e-9);
  EXPECT_EQ(gpu().sum(gpu().zeros({0}, DType::f32)), 0.0);
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
