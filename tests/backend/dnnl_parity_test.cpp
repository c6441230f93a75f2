// Every oneDNN-backed op against the reference loops, on random shapes (odd sizes included) and in
// both activation layouts (NCHW and channels-last).
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::all_close;
using test::random_tensor;

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad;
};

class DnnlParity : public ::testing::TestWithParam<MemoryFormat> {
 protected:
  ReferenceBackend ref;
  DnnlBackend cpu;
  Rng rng{1234};
};

TEST_F(DnnlParity, LinearForwardBackwardOddShapes) {
  for (auto [N, K, O] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {7, 13, 5}, {128, 784, 512}, {33, 65, 17}}) {
    Tensor x = random_tensor({N, K}, rng), w = random_tensor({O, K}, rng), b = random_tensor({O}, rng);
    for (PostOp post : {PostOp::none, PostOp::relu}) {
      Tensor y0 = Tensor::empty({N, O}, DType::f32), y1 = Tensor::empty({N, O}, DType::f32);
      ref.linear_forward(x, w, &b, y0, post);
      cpu.linear_forward(x, w, &b, y1, post);
      // f32 dot products of length K differ by rounding order: allow ~sqrt(K) ulps of the output scale.
      EXPECT_TRUE(all_close(y1, y0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(K)))) << N << "x" << K << "x" << O;
    }
    Tensor dy = random_tensor({N, O}, rng);
    Tensor dx0 = Tensor::empty({N, K}, DType::f32), dx1 = Tensor::empty({N, K}, DType::f32);
    ref.linear_backward_data(dy, w, dx0);
    cpu.linear_backward_data(dy, w, dx1);
    EXPECT_TRUE(all_close(dx1, dx0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(O))));
    Tensor dw0 = Tensor::empty({O, K}, DType::f32), dw1 = Tensor::empty({O, K}, DType::f32);
    Tensor db0 = Tensor::empty({O}, DType::f32), db1 = Tensor::empty({O}, DType::f32);
    ref.linear_backward_weights(x, dy, dw0, &db0);
    cpu.linear_backward_weights(x, dy, dw1, &db1);
    EXPECT_TRUE(all_close(dw1, dw0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(N))));
    EXPECT_TRUE(all_close(db1, db0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(N))));
  }
}

TEST_P(DnnlParity, ConvForwardBackward) {
  const MemoryFormat fmt = GetParam();
  const std::vector<ConvCase> cases = {{2, 1, 28, 28, 32, 3, 1, 1},
                                       {3, 32, 14, 14, 64, 3, 1, 1},
                                       {1, 3, 7, 9, 5, 3, 2, 0},
                                       {2, 5, 11, 6, 7, 1, 1, 0},
                                       {4, 16, 9, 9, 8, 5, 2, 2}};
  for (const ConvCase& cc : cases) {
    const ConvParams p{cc.stride, cc.stride, cc.pad, cc.pad};
    const int64_t oh = conv_out_size(cc.h, cc.k, cc.stride, cc.pad), ow = conv_out_size(cc.w, cc.k, cc.stride, cc.pad);
    Tensor x = random_tensor({cc.n, cc.c, cc.h, cc.w}, rng, DType::f32, fmt);
    Tensor w = random_tensor({cc.o, cc.c, cc.k, cc.k}, rng), b = random_tensor({cc.o}, rng);
    for (PostOp post : {PostOp::none, PostOp::relu}) {
      Tensor y0 = Tensor::empty({cc.n, cc.o, oh, ow}, DType::f32);
      Tensor y1 = Tensor::empty({cc.n, cc.o, oh, ow}, DType::f32, Device::cpu(), fmt);
      ref.conv2d_forward(p, x, w, &b, y0, post);
      cpu.conv2d_forward(p, x, w, &b, y1, post);
      EXPECT_TRUE(all_close(y1, y0, 1e-4, 1e-4)) << "fwd case c=" << cc.c << " o=" << cc.o;
    }
    Tensor dy = random_tensor({cc.n, cc.o, oh, ow}, rng, DType::f32, fmt);
    Tensor dx0 = Tensor::empty(x.shape(), DType::f32), dx1 = Tensor::empty(x.shape(), DType::f32, Device::cpu(), fmt);
    ref.conv2d_backward_data(p, dy, w, dx0);
    cpu.conv2d_backward_data(p, dy, w, dx1);
    EXPECT_TRUE(all_close(dx1, dx0, 1e-4, 1e-4)) << "bwd data c=" << cc.c;
    Tensor dw0 = Tensor::empty(w.shape(), DType::f32), dw1 = Tensor::empty(w.shape(), DType::f32);
    Tensor db0 = Tensor::empty({cc.o}, DType::f32), db1 = Tensor::empty({cc.o}, DType::f32);
    ref.conv2d_backward_weights(p, x, dy, dw0, &db0);
    cpu.conv2d_backward_weights(p, x, dy, dw1, &db1);
    EXPECT_TRUE(all_close(dw1, dw0, 1e-3, 1e-3)) << "bwd weights c=" << cc.c;
    EXPECT_TRUE(all_close(db1, db0, 1e-3, 1e-3));
  }
}

TEST_P(DnnlParity, MaxPoolForwardBackward) {
  const MemoryFormat fmt = GetParam();
  for (auto [H, W, k, s] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{{28, 28, 2, 2}, {7, 9, 3, 2}, {5, 5, 2, 1}}) {
    const PoolParams p{k, k, s, s, 0, 0};
    Tensor x = random_tensor({3, 5, H, W}, rng, DType::f32, fmt);
    const Shape out{3, 5, conv_out_size(H, k, s, 0), conv_out_size(W, k, s, 0)};
    Tensor y0 = Tensor::empty(out, DType::f32), y1 = Tensor::empty(out, DType::f32, Device::cpu(), fmt);
    Tensor ws0, ws1;
    ref.maxpool2d_forward(p, x, y0, ws0);
    cpu.maxpool2d_forward(p, x, y1, ws1);
    EXPECT_TRUE(all_close(y1, y0, 0, 0));
    Tensor dy = random_tensor(out, rng, DType::f32, fmt);
    Tensor dx0 = Tensor::empty(x.shape(), DType::f32), dx1 = Tensor::empty(x.shape(), DType::f32, Device::cpu(), fmt);
    ref.maxpool2d_backward(p, dy, ws0, dx0);
    cpu.maxpool2d_backward(p, dy, ws1, dx1);
    EXPECT_TRUE(all_close(dx1, dx0, 1e-6, 1e-6));
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DnnlParity, ::testing::Values(MemoryFormat::contiguous, MemoryFormat::channels_last),
                         [](const auto& info) { return info.param == MemoryFormat::contiguous ? "nchw" : "nhwc"; });

TEST_F(DnnlParity, ElementwiseLossAndOptimizers) {
  Tensor a = random_tensor({4, 3, 5, 7}, rng), b = random_tensor({4, 3, 5, 7}, rng);
  Tensor r0 = Tensor::empty(a.shape(), DType::f32), r1 = Tensor::empty(a.shape(), DType::f32);
  ref.relu_forward(a, r0);
  cpu.relu_forward(a, r1);
  EXPECT_TRUE(all_close(r1, r0, 0, 0));
  ref.relu_backward(r0, b, r0);  // in place on purpose
  cpu.relu_backward(r1, b, r1);
  EXPECT_TRUE(all_close(r1, r0, 0, 0));
  ref.add(a, b, r0);
  cpu.add(a, b, r1);
  EXPECT_TRUE(all_close(r1, r0, 0, 0));
  ref.axpy(0.3, a, r0);
  cpu.axpy(0.3, a, r1);
  EXPECT_TRUE(all_close(r1, r0, 1e-6, 1e-7));
  EXPECT_NEAR(cpu.sum(a), ref.sum(a), 1e-4);
  EXPECT_NEAR(cpu.sum_squares(a), ref.sum_squares(a), 1e-4);

  Tensor logits = random_tensor({37, 10}, rng, DType::f32, MemoryFormat::contiguous, -5, 5);
  Tensor labels = Tensor::empty({37}, DType::s32);
  for (int i = 0; i < 37; ++i)
    labels.set({i}, static_cast<double>(rng.below(10)));
  Tensor g0 = Tensor::empty({37, 10}, DType::f32), g1 = Tensor::empty({37, 10}, DType::f32);
  LossResult l0 = ref.softmax_cross_entropy(logits, labels, &g0, 1.0 / 37);
  LossResult l1 = cpu.softmax_cross_entropy(logits, labels, &g1, 1.0 / 37);
  EXPECT_NEAR(l1.loss_sum, l0.loss_sum, 1e-4);
  EXPECT_EQ(l1.correct, l0.correct);
  EXPECT_TRUE(all_close(g1, g0, 1e-5, 1e-7));

  for (bool nesterov : {false, true}) {
    Tensor w0 = random_tensor({1000}, rng), grad = random_tensor({1000}, rng);
    Tensor w1 = w0.contiguous_copy(), m0 = Tensor::zeros({1000}, DType::f32), m1 = Tensor::zeros({1000}, DType::f32);
    const SgdParams sp{0.05, 0.9, 1e-4, nesterov};
    for (int step = 0; step < 3; ++step) {
      ref.sgd_update(sp, w0, grad, m0);
      cpu.sgd_update(sp, w1, grad, m1);
    }
    EXPECT_TRUE(all_close(w1, w0, 1e-6, 1e-7));
  }
  Tensor w0 = random_tensor({999}, rng), grad = random_tensor({999}, rng), w1 = w0.contiguous_copy();
  Tensor m0 = Tensor::zeros({999}, DType::f32), v0 = Tensor::zeros({999}, DType::f32);
  Tensor m1 = Tensor::zeros({999}, DType::f32), v1 = Tensor::zeros({999}, DType::f32);
  for (int64_t step = 1; step <= 3; ++step) {
    AdamWParams ap;
    ap.step = step;
    ref.adamw_update(ap, w0, grad, m0, v0);
    cpu.adamw_update(ap, w1, grad, m1, v1);
  }
  EXPECT_TRUE(all_close(w1, w0, 1e-5, 1e-6));
}

TEST_F(DnnlParity, PrimitivesAreCachedAcrossCalls) {
  Tensor x = random_tensor({8, 16}, rng), w = random_tensor({4, 16}, rng), y = Tensor::empty({8, 4}, DType::f32);
  cpu.linear_forward(x, w, nullptr, y, PostOp::none);
  const size_t after_first = cpu.primitives_created();
  for (int i = 0; i < 5; ++i)
    cpu.linear_forward(x, w, nullptr, y, PostOp::none);
  EXPECT_EQ(cpu.primitives_created(), after_first);
}

TEST_F(DnnlParity, ReorderBetweenLayouts) {
  Tensor a = random_tensor({2, 6, 5, 3}, rng);
  Tensor b = Tensor::empty(a.shape(), DType::f32, Device::cpu(), MemoryFormat::channels_last);
  cpu.reorder(a, b);
  EXPECT_TRUE(all_close(b, a, 0, 0));
  Tensor h = Tensor::empty(a.shape(), DType::bf16);
  cpu.reorder(a, h);
  EXPECT_TRUE(all_close(h, a, 1.0 / 128, 0));
}

}  // namespace
}  // namespace lathe
