// Parity of the CUDA backend's dense layers, convolutions and max pooling with ReferenceBackend
// run in f64 on the same f32 inputs: random shapes including odd sizes, NCHW and channels-last
// (mixed between operands too), with and without bias / ReLU. Outputs are NaN-poisoned first.
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include "tests/gpu/gpu_test_support.h"

namespace lathe {
namespace {

using gputest::close;
using gputest::CudaTest;
using gputest::host_random;
using gputest::to_f64;

constexpr double kRel = 1e-4;

int64_t pick(Rng& rng, int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng.below(hi - lo + 1)); }

// ---------------------------------------------------------------- linear
TEST_F(CudaTest, LinearForwardMatchesReference) {
  Rng rng(gputest::base_seed() + 10);
  for (int trial = 0; trial < 8; ++trial) {
    const bool mlp = trial == 0;
    const int64_t N = mlp ? 128 : pick(rng, 1, 70), K = mlp ? 784 : pick(rng, 1, 300),
                  O = mlp ? 512 : pick(rng, 1, 130);
    const bool with_bias = trial % 2 == 0;
    const PostOp post = trial % 3 == 0 ? PostOp::relu : PostOp::none;
    SCOPED_TRACE("trial " + std::to_string(trial) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                 " O=" + std::to_string(O));
    const Tensor x = host_random({N, K}, rng), w = host_random({O, K}, rng), b = host_random({O}, rng);
    Tensor want = Tensor::empty({N, O}, DType::f64);
    const Tensor b64 = to_f64(b);
    m_ref.linear_forward(to_f64(x), to_f64(w), with_bias ? &b64 : nullptr, want, post);
    const Tensor db = up(b);
    Tensor y = poisoned({N, O});
    gpu().linear_forward(up(x), up(w), with_bias ? &db : nullptr, y, post);
    EXPECT_TRUE(close(down(y), want, kRel));
  }
}

TEST_F(CudaTest, LinearBackwardMatchesReference) {
  Rng rng(gputest::base_seed() + 11);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t N = pick(rng, 1, 90), K = pick(rng, 1, 260), O = pick(rng, 1, 70);
    SCOPED_TRACE("trial " + std::to_string(trial) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                 " O=" + std::to_string(O));
    const Tensor x = host_random({N, K}, rng), w = host_random({O, K}, rng), dy = host_random({N, O}, rng);
    Tensor want_dx = Tensor::empty({N, K}, DType::f64), want_dw = Tensor::empty({O, K}, DType::f64);
    Tensor want_db = Tensor::empty({O}, DType::f64);
    m_ref.linear_backward_data(to_f64(dy), to_f64(w), want_dx);
    m_ref.linear_backward_weights(to_f64(x), to_f64(dy), want_dw, &want_db);
    Tensor dx = poisoned({N, K}), dw = poisoned({O, K}), db = poisoned({O});
    const Tensor ddy = up(dy);
    gpu().linear_backward_data(ddy, up(w), dx);
    gpu().linear_backward_weights(up(x), ddy, dw, trial % 2 ? &db : nullptr);
    EXPECT_TRUE(close(down(dx), want_dx, kRel));
    EXPECT_TRUE(close(down(dw), want_dw, kRel));
    if (trial % 2)
      EXPECT_TRUE(close(down(db), want_db, kRel));
  }
}

// ---------------------------------------------------------------- conv2d
struct RandomConv {
  int64_t N, C, H, W, O, K;
  ConvParams p;
  MemoryFormat src_format, dst_format;
};

RandomConv random_conv(Rng& rng, int trial) {
  RandomConv c;
  c.N = pick(rng, 1, 4);
  c.C = trial == 0 ? 1 : pick(rng, 1, 9);
  c.H = pick(rng, 5, 17);
  c.W = pick(rng, 5, 17);
  c.O = pick(rng, 1, 12);
  const int64_t ks[] = {1, 3, 5};
  c.K = ks[rng.below(3)];
  c.p.stride_h = pick(rng, 1, 2);
  c.p.stride_w = pick(rng, 1, 2);
  c.p.pad_h = pick(rng, 0, c.K / 2 + 1);
  c.p.pad_w = pick(rng, 0, c.K / 2 + 1);
  c.src_format = trial & 1 ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  c.dst_format = trial & 2 ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  return c;
}

std::string describe(const RandomConv& c) {
  return "N" + std::to_string(c.N) + " C" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " O" + std::to_string(c.O) + " K" + std::to_string(c.K) + " s" +
         std::to_string(c.p.stride_h) + std::to_string(c.p.stride_w) + " p" + std::to_string(c.p.pad_h) +
         std::to_string(c.p.pad_w) + " " + gputest::format_name(c.src_format) + "->" +
         gputest::format_name(c.dst_format);
}

TEST_F(CudaTest, ConvForwardMatchesReference) {
  Rng rng(gputest::base_seed() + 20);
  for (int trial = 0; trial < 12; ++trial) {
    const RandomConv c = random_conv(rng, trial);
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + describe(c));
    const int64_t OH = conv_out_size(c.H, c.K, c.p.stride_h, c.p.pad_h);
    const int64_t OW = conv_out_size(c.W, c.K, c.p.stride_w, c.p.pad_w);
    const Tensor x = host_random({c.N, c.C, c.H, c.W}, rng), w = host_random({c.O, c.C, c.K, c.K}, rng);
    const Tensor b = host_random({c.O}, rng);
    const bool with_bias = trial % 3 != 1;
    const PostOp post = trial % 2 ? PostOp::relu : PostOp::none;
    Tensor want = Tensor::empty({c.N, c.O, OH, OW}, DType::f64);
    const Tensor b64 = to_f64(b);
    m_ref.conv2d_forward(c.p, to_f64(x), to_f64(w), with_bias ? &b64 : nullptr, want, post);
    Tensor y = poisoned({c.N, c.O, OH, OW}, c.dst_format);
    const Tensor db = up(b);
    gpu().conv2d_forward(c.p, up(x, c.src_format),
                         up(w, trial % 4 == 3 ? MemoryFormat::channels_last : MemoryFormat::contiguous),
                         with_bias ? &db : nullptr, y, post);
    EXPECT_TRUE(close(down(y), want, kRel));
  }
}

TEST_F(CudaTest, ConvBackwardMatchesReference) {
  Rng rng(gputest::base_seed() + 21);
  for (int trial = 0; trial < 12; ++trial) {
    const RandomConv c = random_conv(rng, trial);
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + describe(c));
    const int64_t OH = conv_out_size(c.H, c.K, c.p.stride_h, c.p.pad_h);
    const int64_t OW = conv_out_size(c.W, c.K, c.p.stride_w, c.p.pad_w);
    const Tensor x = host_random({c.N, c.C, c.H, c.W}, rng), w = host_random({c.O, c.C, c.K, c.K}, rng);
    const Tensor dy = host_random({c.N, c.O, OH, OW}, rng);
    Tensor want_dx = Tensor::empty(x.shape(), DType::f64), want_dw = Tensor::empty(w.shape(), DType::f64);
    Tensor want_db = Tensor::empty({c.O}, DType::f64);
    m_ref.conv2d_backward_data(c.p, to_f64(dy), to_f64(w), want_dx);
    m_ref.conv2d_backward_weights(c.p, to_f64(x), to_f64(dy), want_dw, &want_db);
    // src/diff_src in src_format, diff_dst in dst_format: mixed layouts are staged by the backend.
    const Tensor ddy = up(dy, c.dst_format);
    Tensor dx = poisoned(x.shape(), c.src_format), dw = poisoned(w.shape(), c.src_format), db = poisoned({c.O});
    gpu().conv2d_backward_data(c.p, ddy, up(w), dx);
    gpu().conv2d_backward_weights(c.p, up(x, c.src_format), ddy, dw, &db);
    EXPECT_TRUE(close(down(dx), want_dx, kRel));
    EXPECT_TRUE(close(down(dw), want_dw, kRel));
    EXPECT_TRUE(close(down(db), want_db, kRel));
  }
}

TEST_F(CudaTest, ConvOnTheCnnShapesMatchesReference) {
  Rng rng(gputest::base_seed() + 22);
  const ConvParams p{1, 1, 1, 1};
  for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
    SCOPED_TRACE(gputest::format_name(f));
    const Tensor x = host_random({8, 32, 14, 14}, rng),
                 w = host_random({64, 32, 3, 3}, rng, MemoryFormat::contiguous, 0.1);
    const Tensor b = host_random({64}, rng);
    Tensor want = Tensor::empty({8, 64, 14, 14}, DType::f64);
    const Tensor b64 = to_f64(b);
    m_ref.conv2d_forward(p, to_f64(x), to_f64(w), &b64, want, PostOp::relu);
    Tensor y = poisoned({8, 64, 14, 14}, f);
    const Tensor db = up(b);
    gpu().conv2d_forward(p, up(x, f), up(w, f), &db, y, PostOp::relu);
    EXPECT_TRUE(close(down(y), want, kRel));
  }
}

// ---------------------------------------------------------------- max pooling
TEST_F(CudaTest, MaxPoolMatchesReferenceIncludingTiesAndArgmax) {
  Rng rng(gputest::base_seed() + 30);
  const PoolParams windows[] = {{2, 2, 2, 2, 0, 0}, {3, 3, 2, 2, 1, 1}, {3, 2, 1, 2, 0, 1}};
  for (int trial = 0; trial < 9; ++trial) {
    const PoolParams& pp = windows[trial % 3];
    const MemoryFormat f = trial % 2 ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    const int64_t N = pick(rng, 1, 3), C = pick(rng, 1, 6), H = pick(rng, 4, 15), W = pick(rng, 4, 15);
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + std::to_string(H) + "x" + std::to_string(W) + " " +
                 gputest::format_name(f));
    Tensor x = host_random({N, C, H, W}, rng);
    // After ReLU whole windows are 0 and values repeat: ties must go to the first maximum.
    for (int64_t i = 0; i < x.numel(); ++i)
      x.set_flat(i, std::max(0.0, std::round(x.at_flat(i) * 2) / 2));
    const int64_t OH = conv_out_size(H, pp.kernel_h, pp.stride_h, pp.pad_h);
    const int64_t OW = conv_out_size(W, pp.kernel_w, pp.stride_w, pp.pad_w);
    const Tensor dy = host_random({N, C, OH, OW}, rng);
    Tensor want = Tensor::empty({N, C, OH, OW}, DType::f64), want_ws, want_dx = Tensor::empty(x.shape(), DType::f64);
    m_ref.maxpool2d_forward(pp, to_f64(x), want, want_ws);
    m_ref.maxpool2d_backward(pp, to_f64(dy), want_ws, want_dx);

    Tensor y = poisoned({N, C, OH, OW}, f), ws, dx = poisoned(x.shape(), f);
    gpu().maxpool2d_forward(pp, up(x, f), y, ws);
    gpu().maxpool2d_backward(pp, up(dy, f), ws, dx);
    EXPECT_TRUE(close(down(y), want, 0));
    const Tensor got_ws = down(ws);
    for (int64_t i = 0; i < want_ws.numel(); ++i)
      ASSERT_EQ(got_ws.data<int32_t>()[i], want_ws.data<int32_t>()[i]) << "argmax " << i;
    EXPECT_TRUE(close(down(dx), want_dx, 1e-6));
  }
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
