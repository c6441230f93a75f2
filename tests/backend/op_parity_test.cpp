// One op-parity suite (as ggml's test-backend-ops): every op, dense and compressed, run on every
// backend against the reference backend (the oracle), with a tolerance per dtype: f32 results to a
// relative 1e-5 (dot products: growing with sqrt(K)), 8-bit results to 1 LSB (oneDNN and cuBLASLt round as the
// reference does; a tie may flip), integer ops (quantize, max pooling, ReLU) exactly. Also: a call that breaks an op's
// contract is refused on every backend with a message naming the op and the shapes. Backends not
// in this build or without a device skip with the reason (GTEST_SKIP), so the cuda cases show up;
// test_gpu compiles this file again for the cuda backend alone (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/backend.h"
#ifdef LATHE_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif
#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/quant/int8_layer.h"
#include "engine/compress/quant/observer.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::all_close;
using test::random_tensor;

/// Why the backend has no device, where its library says ("" otherwise).
std::string device_reason(const std::string& name) {
#ifdef LATHE_HAVE_CUDA
  if (name == "cuda")
    return ": " + cuda::device_unavailable_reason();
#endif
  return "";
}

class OpParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string name = GetParam();
    bool registered = false;
    for (const std::string& n : registered_backends())
      registered |= n == name;
    if (!registered)
      GTEST_SKIP() << "backend '" << name << "' is not in this build";
    if (backend_device_count(name) == 0)
      GTEST_SKIP() << "backend '" << name << "' has no device here" << device_reason(name);
    m_be = make_backend(name);
  }
  Backend& be() { return *m_be; }
  ReferenceBackend& ref() { return m_ref; }

  /// A copy of host tensor t on the backend's device, keeping its layout.
  Tensor up(const Tensor& t) {
    Tensor d = be().empty(t.shape(), t.dtype(), t.format());
    be().copy(t, d);
    return d;
  }
  Tensor down(const Tensor& t) {
    be().synchronize();
    Tensor h = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), t.format());
    be().copy(t, h);
    be().synchronize();
    return h;
  }

  /// A conv's backward on the backend (input gradient written in `dx_format`, weight and bias
  /// gradients) against the reference's, for input x, weights w and output gradient dy (host f32).
  void expect_conv_backward_matches(const ConvParams& p, const Tensor& x, const Tensor& w, const Tensor& dy,
                                    MemoryFormat dx_format) {
    const Tensor xd = up(x), wd = up(w), dyd = up(dy);
    Tensor dx0 = Tensor::empty(x.shape(), DType::f32), dx1 = be().empty(x.shape(), DType::f32, dx_format);
    ref().conv2d_backward_data(p, dy, w, dx0);
    be().conv2d_backward_data(p, dyd, wd, dx1);
    EXPECT_TRUE(all_close(down(dx1), dx0, 1e-4, 1e-4)) << "backward data";
    const int64_t o = w.dim(0);
    Tensor dw0 = Tensor::empty(w.shape(), DType::f32), dw1 = be().empty(w.shape(), DType::f32);
    Tensor db0 = Tensor::empty({o}, DType::f32), db1 = be().empty({o}, DType::f32);
    ref().conv2d_backward_weights(p, x, dy, dw0, &db0);
    be().conv2d_backward_weights(p, xd, dyd, dw1, &db1);
    EXPECT_TRUE(all_close(down(dw1), dw0, 1e-3, 1e-3)) << "backward weights";
    EXPECT_TRUE(all_close(down(db1), db0, 1e-3, 1e-3)) << "backward bias";
  }

  /// got vs want elementwise (logical order): f32 within rel * (|want| + 1), 8-bit within lsb.
  static void expect_close(const Tensor& got, const Tensor& want, double rel, double lsb, const std::string& op) {
    ASSERT_EQ(got.shape(), want.shape()) << op;
    ASSERT_EQ(got.dtype(), want.dtype()) << op;
    const bool ints = want.dtype() == DType::s8 || want.dtype() == DType::u8;
    int64_t off = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double a = got.at_flat(i), b = want.at_flat(i);
      ASSERT_FALSE(std::isnan(a)) << op << " element " << i;
      if (ints) {
        ASSERT_LE(std::fabs(a - b), lsb) << op << " element " << i;
        off += a != b;
      } else {
        ASSERT_NEAR(a, b, rel * (std::fabs(b) + 1)) << op << " element " << i;
      }
    }
    EXPECT_LE(off, want.numel() / 50 + 1) << op << ": too many 1-LSB differences";
  }

  std::unique_ptr<Backend> m_be;
  ReferenceBackend m_ref;
};

QuantParams params_of(const Tensor& x, bool is_signed, bool symmetric) {
  MinMaxObserver obs;
  obs.observe(x);
  return obs.params(8, symmetric, is_signed);
}

// ---------------------------------------------------------------- dense f32
// f32 dot products of length K differ by rounding order: tolerances grow with sqrt(K).
TEST_P(OpParity, LinearForwardBackwardOddShapes) {
  Rng rng(1234);
  for (auto [N, K, O] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {7, 13, 5}, {128, 784, 512}, {33, 65, 17}}) {
    SCOPED_TRACE(testing::Message() << N << "x" << K << "x" << O);
    Tensor x = random_tensor({N, K}, rng), w = random_tensor({O, K}, rng), b = random_tensor({O}, rng);
    const Tensor xd = up(x), wd = up(w), bd = up(b);
    for (PostOp post : {PostOp::none, PostOp::relu}) {
      Tensor y0 = Tensor::empty({N, O}, DType::f32), y1 = be().empty({N, O}, DType::f32);
      ref().linear_forward(x, w, &b, y0, post);
      be().linear_forward(xd, wd, &bd, y1, post);
      EXPECT_TRUE(all_close(down(y1), y0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(K))));
    }
    Tensor dy = random_tensor({N, O}, rng);
    const Tensor dyd = up(dy);
    Tensor dx0 = Tensor::empty({N, K}, DType::f32), dx1 = be().empty({N, K}, DType::f32);
    ref().linear_backward_data(dy, w, dx0);
    be().linear_backward_data(dyd, wd, dx1);
    EXPECT_TRUE(all_close(down(dx1), dx0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(O))));
    Tensor dw0 = Tensor::empty({O, K}, DType::f32), dw1 = be().empty({O, K}, DType::f32);
    Tensor db0 = Tensor::empty({O}, DType::f32), db1 = be().empty({O}, DType::f32);
    ref().linear_backward_weights(x, dy, dw0, &db0);
    be().linear_backward_weights(xd, dyd, dw1, &db1);
    EXPECT_TRUE(all_close(down(dw1), dw0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(N))));
    EXPECT_TRUE(all_close(down(db1), db0, 1e-4, 1e-5 * std::sqrt(static_cast<double>(N))));
  }
}

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad;
};

TEST_P(OpParity, ConvForwardBackwardInBothLayouts) {
  Rng rng(1235);
  const std::vector<ConvCase> cases = {{2, 1, 28, 28, 32, 3, 1, 1},
                                       {3, 32, 14, 14, 64, 3, 1, 1},
                                       {1, 3, 7, 9, 5, 3, 2, 0},
                                       {2, 5, 11, 6, 7, 1, 1, 0},
                                       {4, 16, 9, 9, 8, 5, 2, 2}};
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
    for (const ConvCase& cc : cases) {
      SCOPED_TRACE(testing::Message() << (fmt == MemoryFormat::contiguous ? "nchw" : "nhwc") << " c=" << cc.c
                                      << " o=" << cc.o << " k=" << cc.k);
      const ConvParams p{cc.stride, cc.stride, cc.pad, cc.pad};
      const int64_t oh = conv_out_size(cc.h, cc.k, cc.stride, cc.pad),
                    ow = conv_out_size(cc.w, cc.k, cc.stride, cc.pad);
      Tensor x = random_tensor({cc.n, cc.c, cc.h, cc.w}, rng, DType::f32, fmt);
      Tensor w = random_tensor({cc.o, cc.c, cc.k, cc.k}, rng), b = random_tensor({cc.o}, rng);
      const Tensor xd = up(x), wd = up(w), bd = up(b);
      for (PostOp post : {PostOp::none, PostOp::relu}) {
        Tensor y0 = Tensor::empty({cc.n, cc.o, oh, ow}, DType::f32);
        Tensor y1 = be().empty({cc.n, cc.o, oh, ow}, DType::f32, fmt);
        ref().conv2d_forward(p, x, w, &b, y0, post);
        be().conv2d_forward(p, xd, wd, &bd, y1, post);
        EXPECT_TRUE(all_close(down(y1), y0, 1e-4, 1e-4)) << "forward";
      }
      const Tensor dy = random_tensor({cc.n, cc.o, oh, ow}, rng, DType::f32, fmt);
      expect_conv_backward_matches(p, x, w, dy, fmt);
    }
}

// A network's first conv on colour data: the loader's NCHW batch (C > 1) into a channels-last
// output, and its gradients back into NCHW (the cpu backend goes through a channels-last copy).
TEST_P(OpParity, ConvOfAPlainColourInputIntoChannelsLast) {
  Rng rng(1238);
  for (const ConvCase& cc : std::vector<ConvCase>{{4, 3, 32, 32, 16, 3, 1, 1}, {2, 2, 9, 7, 5, 3, 2, 0}}) {
    SCOPED_TRACE(testing::Message() << "c=" << cc.c << " o=" << cc.o);
    const ConvParams p{cc.stride, cc.stride, cc.pad, cc.pad};
    const Shape out{cc.n, cc.o, conv_out_size(cc.h, cc.k, cc.stride, cc.pad), conv_out_size(cc.w, cc.k, cc.stride, cc.pad)};
    Tensor x = random_tensor({cc.n, cc.c, cc.h, cc.w}, rng);  // NCHW
    Tensor w = random_tensor({cc.o, cc.c, cc.k, cc.k}, rng), b = random_tensor({cc.o}, rng);
    const Tensor xd = up(x), wd = up(w), bd = up(b);
    Tensor y0 = Tensor::empty(out, DType::f32), y1 = be().empty(out, DType::f32, MemoryFormat::channels_last);
    ref().conv2d_forward(p, x, w, &b, y0, PostOp::relu);
    be().conv2d_forward(p, xd, wd, &bd, y1, PostOp::relu);
    EXPECT_TRUE(all_close(down(y1), y0, 1e-4, 1e-4)) << "forward";
    const Tensor dy = random_tensor(out, rng, DType::f32, MemoryFormat::channels_last);
    expect_conv_backward_matches(p, x, w, dy, MemoryFormat::contiguous);  // dx back into NCHW
  }
}

TEST_P(OpParity, MaxPoolForwardBackwardInBothLayouts) {
  Rng rng(1236);
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
    for (auto [H, W, k, s] :
         std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{{28, 28, 2, 2}, {7, 9, 3, 2}, {5, 5, 2, 1}}) {
      const PoolParams p{k, k, s, s, 0, 0};
      Tensor x = random_tensor({3, 5, H, W}, rng, DType::f32, fmt);
      const Shape out{3, 5, conv_out_size(H, k, s, 0), conv_out_size(W, k, s, 0)};
      Tensor y0 = Tensor::empty(out, DType::f32), y1 = be().empty(out, DType::f32, fmt);
      Tensor ws0, ws1;
      const Tensor xd = up(x);
      ref().maxpool2d_forward(p, x, y0, ws0);
      be().maxpool2d_forward(p, xd, y1, ws1);
      EXPECT_TRUE(all_close(down(y1), y0, 0, 0));
      Tensor dy = random_tensor(out, rng, DType::f32, fmt);
      Tensor dx0 = Tensor::empty(x.shape(), DType::f32), dx1 = be().empty(x.shape(), DType::f32, fmt);
      ref().maxpool2d_backward(p, dy, ws0, dx0);
      be().maxpool2d_backward(p, up(dy), ws1, dx1);
      EXPECT_TRUE(all_close(down(dx1), dx0, 1e-6, 1e-6));
    }
}

/// Elements of a and b (logical order) that differ, a NaN matching a NaN.
int64_t differing(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.at_flat(i), y = b.at_flat(i);
    n += !(x == y || (std::isnan(x) && std::isnan(y)));
  }
  return n;
}

/// Values with many ties inside a window (a handful of levels, negative ones and -0), all of them
/// bf16-exact; with specials, -inf and a few NaN too.
Tensor tied_values(const Shape& shape, Rng& rng, DType dt, MemoryFormat fmt, bool specials) {
  const double levels[] = {-3.0, -1.5, -0.25, -0.0, 0.0, 0.5, 2.0, -2.0};
  Tensor t = Tensor::empty(shape, dt, Device::cpu(), fmt);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double u = rng.uniform(0, 1);
    const double v = levels[static_cast<int>(u * 8) % 8];
    t.set_flat(i, !specials ? v : u < 0.03 ? std::nan("") : u > 0.75 ? -std::numeric_limits<double>::infinity() : v);
  }
  return t;
}

// Ties (the first maximum in (kh, kw) order wins, as in PyTorch), negative values, windows
// that leave rows/columns uncovered, channel counts off the vector width; f32 and, where the backend
// stores bf16 activations, bf16 (whose results must be the same values: pooling only selects).
TEST_P(OpParity, MaxPoolTiesNegativesAndBf16Exactly) {
  Rng rng(1237);
  const bool bf16 = be().supports(Op::maxpool2d, DType::bf16);
  for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
    for (auto [C, H, W, k] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
             {32, 28, 28, 2}, {5, 7, 9, 2}, {17, 9, 7, 3}, {64, 14, 14, 2}, {3, 4, 6, 1}}) {
      const PoolParams p{k, k, k, k, 0, 0};
      const Shape in{3, C, H, W}, out{3, C, conv_out_size(H, k, k, 0), conv_out_size(W, k, k, 0)};
      const std::string what = "maxpool k" + std::to_string(k) + " " + shape_str(in) +
                               (fmt == MemoryFormat::channels_last ? " channels-last" : " contiguous");
      Tensor x = tied_values(in, rng, DType::f32, fmt, false);
      Tensor dy = tied_values(out, rng, DType::f32, fmt, false);
      Tensor y0 = Tensor::empty(out, DType::f32), ws0, dx0 = Tensor::empty(in, DType::f32);
      ref().maxpool2d_forward(p, x, y0, ws0);
      ref().maxpool2d_backward(p, dy, ws0, dx0);
      for (DType dt : {DType::f32, DType::bf16}) {
        if (dt == DType::bf16 && !bf16)
          continue;
        Tensor xh = Tensor::empty(in, dt, Device::cpu(), fmt);  // the same values (bf16-exact)
        for (int64_t i = 0; i < x.numel(); ++i)
          xh.set_flat(i, x.at_flat(i));
        const Tensor xd = up(xh);
        Tensor y1 = be().empty(out, dt, fmt), ws1;
        be().maxpool2d_forward(p, xd, y1, ws1);
        EXPECT_EQ(differing(down(y1), y0), 0) << what << " " << dtype_name(dt) << " forward";
        Tensor dyh = Tensor::empty(out, dt, Device::cpu(), fmt);
        for (int64_t i = 0; i < dy.numel(); ++i)
          dyh.set_flat(i, dy.at_flat(i));
        Tensor dx1 = be().empty(in, dt, fmt);
        be().maxpool2d_backward(p, up(dyh), ws1, dx1);
        EXPECT_EQ(differing(down(dx1), dx0), 0) << what << " " << dtype_name(dt) << " backward";
        if (GetParam() == "cpu" && fmt == MemoryFormat::channels_last)  // the compact argmax: a byte per output
          EXPECT_EQ(ws1.numel(), y1.numel()) << what;
      }
    }
}

/// The backend's max pooling of x (f32 values, bf16-exact) at dtype dt in layout fmt, forward and
/// backward, against the reference's: the same values, NaN matching NaN. `what` names the case.
void expect_maxpool_as_reference(Backend& be, ReferenceBackend& ref, const PoolParams& p, const Tensor& x, DType dt,
                                 MemoryFormat fmt, Rng& rng, const std::string& what) {
  const Shape& in = x.shape();
  const Shape out{in[0], in[1], conv_out_size(in[2], p.kernel_h, p.stride_h, p.pad_h),
                  conv_out_size(in[3], p.kernel_w, p.stride_w, p.pad_w)};
  auto on_backend = [&](const Tensor& t) {  // t's values at dt in fmt, on the backend's device
    Tensor h = Tensor::empty(t.shape(), dt, Device::cpu(), fmt);
    for (int64_t i = 0; i < t.numel(); ++i)
      h.set_flat(i, t.at_flat(i));
    Tensor d = be.empty(t.shape(), dt, fmt);
    be.copy(h, d);
    return d;
  };
  auto on_host = [&](const Tensor& t) {
    be.synchronize();
    Tensor h = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), t.format());
    be.copy(t, h);
    be.synchronize();
    return h;
  };
  Tensor y0 = Tensor::empty(out, DType::f32), y1 = be.empty(out, dt, fmt), ws0, ws1;
  ref.maxpool2d_forward(p, x, y0, ws0);
  be.maxpool2d_forward(p, on_backend(x), y1, ws1);
  EXPECT_EQ(differing(on_host(y1), y0), 0) << what << " forward";
  Tensor dy = tied_values(out, rng, DType::f32, MemoryFormat::contiguous, false);
  Tensor dx0 = Tensor::empty(in, DType::f32), dx1 = be.empty(in, dt, fmt);
  ref.maxpool2d_backward(p, dy, ws0, dx0);
  be.maxpool2d_backward(p, on_backend(dy), ws1, dx1);
  EXPECT_EQ(differing(on_host(dx1), dx0), 0) << what << " backward";
}

// A window of -inf gives -inf (its gradient to the first valid tap), a window of NaN gives NaN, in
// every path a host backend takes: both layouts, f32 and (where the backend stores bf16
// activations) bf16, non-overlapping, overlapping and padded windows, and on the cpu backend both
// with its own channels-last kernels and with oneDNN's pooling alone (set_own_kernels(false)).
// oneDNN starts each window at -FLT_MAX; the cpu backend redoes the windows left there. Beside
// random -inf, channel 0 is all -inf and channel 1 all NaN.
TEST_P(OpParity, MaxPoolInfAndNaNWindowsAsTheReferenceEverywhere) {
  if (GetParam() != "cpu" && GetParam() != "reference")
    GTEST_SKIP() << "special values are pinned on the host backends only";
  auto* dnnl = dynamic_cast<DnnlBackend*>(&be());
  const bool bf16 = be().supports(Op::maxpool2d, DType::bf16);
  const Shape in{2, 32, 8, 10};
  const int64_t plane = in[2] * in[3];
  Rng rng(1239);
  Tensor x = tied_values(in, rng, DType::f32, MemoryFormat::contiguous, true);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = i / plane % in[1];
    if (c == 1)
      x.set_flat(i, std::nan(""));
    else if (c == 0 || std::isnan(x.at_flat(i)))
      x.set_flat(i, -std::numeric_limits<double>::infinity());
  }
  for (const PoolParams& p : {PoolParams{2, 2, 2, 2, 0, 0}, PoolParams{3, 3, 2, 2, 1, 1}, PoolParams{3, 3, 1, 1, 0, 0}})
    for (MemoryFormat fmt : {MemoryFormat::contiguous, MemoryFormat::channels_last})
      for (DType dt : {DType::f32, DType::bf16})
        for (bool own : {true, false}) {
          if ((dt == DType::bf16 && !bf16) || (!own && !dnnl))
            continue;
          if (dnnl)
            dnnl->set_own_kernels(own);
          expect_maxpool_as_reference(be(), ref(), p, x, dt, fmt, rng,
                                      "maxpool k" + std::to_string(p.kernel_h) + " s" + std::to_string(p.stride_h) +
                                          " p" + std::to_string(p.pad_h) +
                                          (fmt == MemoryFormat::channels_last ? " channels-last " : " contiguous ") +
                                          std::string(dtype_name(dt)) + (own ? "" : " oneDNN only"));
        }
  if (dnnl)
    dnnl->set_own_kernels(true);
}

// NaN among finite values: kept where it is the window's first tap, passed over elsewhere (the
// reference's rule). Pinned for the host backends' own channels-last kernels (f32 and bf16); oneDNN's
// pooling, which the cpu backend keeps for NCHW and overlapping or padded windows, passes over every
// NaN (finding a first-tap NaN after it would read all of src again: maxpool_empty_windows.h).
// Channel 2 has a NaN at every even (h, w), the first tap of each window.
TEST_P(OpParity, MaxPoolNaNAndInfAsTheReference) {
  if (GetParam() != "cpu" && GetParam() != "reference")
    GTEST_SKIP() << "NaN order is pinned on the host backends only";
  Rng rng(1238);
  const PoolParams p{2, 2, 2, 2, 0, 0};
  const Shape in{2, 32, 8, 10};
  Tensor x = tied_values(in, rng, DType::f32, MemoryFormat::contiguous, true);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t w = i % in[3], h = i / in[3] % in[2], c = i / (in[2] * in[3]) % in[1];
    if (c == 2 && h % 2 == 0 && w % 2 == 0)
      x.set_flat(i, std::nan(""));
  }
  for (DType dt : {DType::f32, DType::bf16})
    if (dt == DType::f32 || be().supports(Op::maxpool2d, DType::bf16))
      expect_maxpool_as_reference(be(), ref(), p, x, dt, MemoryFormat::channels_last, rng,
                                  std::string("maxpool 2x2 channels-last ") + std::string(dtype_name(dt)));
}

TEST_P(OpParity, ElementwiseLossAndOptimizers) {
  Rng rng(1237);
  Tensor a = random_tensor({4, 3, 5, 7}, rng), b = random_tensor({4, 3, 5, 7}, rng);
  const Tensor ad = up(a), bd = up(b);
  Tensor r0 = Tensor::empty(a.shape(), DType::f32), r1 = be().empty(a.shape(), DType::f32);
  ref().relu_forward(a, r0);
  be().relu_forward(ad, r1);
  EXPECT_TRUE(all_close(down(r1), r0, 0, 0)) << "relu_forward";
  ref().relu_backward(r0, b, r0);  // in place on purpose
  be().relu_backward(r1, bd, r1);
  EXPECT_TRUE(all_close(down(r1), r0, 0, 0)) << "relu_backward";
  ref().add(a, b, r0);
  be().add(ad, bd, r1);
  EXPECT_TRUE(all_close(down(r1), r0, 0, 0)) << "add";
  ref().axpy(0.3, a, r0);
  be().axpy(0.3, ad, r1);
  EXPECT_TRUE(all_close(down(r1), r0, 1e-6, 1e-7)) << "axpy";
  ref().scale(r0, -1.5);
  be().scale(r1, -1.5);
  EXPECT_TRUE(all_close(down(r1), r0, 1e-6, 1e-7)) << "scale";
  EXPECT_NEAR(be().sum(ad), ref().sum(a), 1e-4);
  EXPECT_NEAR(be().sum_squares(ad), ref().sum_squares(a), 1e-4);

  Tensor logits = random_tensor({37, 10}, rng, DType::f32, MemoryFormat::contiguous, -5, 5);
  Tensor labels = Tensor::empty({37}, DType::s32);
  for (int i = 0; i < 37; ++i)
    labels.set({i}, static_cast<double>(rng.below(10)));
  Tensor g0 = Tensor::empty({37, 10}, DType::f32), g1 = be().empty({37, 10}, DType::f32);
  const LossResult l0 = ref().softmax_cross_entropy(logits, labels, &g0, 1.0 / 37);
  const LossResult l1 = be().softmax_cross_entropy(up(logits), up(labels), &g1, 1.0 / 37);
  EXPECT_NEAR(l1.loss_sum, l0.loss_sum, 1e-4);
  EXPECT_EQ(l1.correct, l0.correct);
  EXPECT_TRUE(all_close(down(g1), g0, 1e-5, 1e-7)) << "softmax_cross_entropy";

  for (bool nesterov : {false, true}) {
    Tensor w0 = random_tensor({1000}, rng), grad = random_tensor({1000}, rng);
    Tensor w1 = up(w0), m0 = Tensor::zeros({1000}, DType::f32), m1 = be().zeros({1000}, DType::f32);
    const Tensor gd = up(grad);
    const SgdParams sp{0.05, 0.9, 1e-4, nesterov};
    for (int step = 0; step < 3; ++step) {
      ref().sgd_update(sp, w0, grad, m0);
      be().sgd_update(sp, w1, gd, m1);
    }
    EXPECT_TRUE(all_close(down(w1), w0, 1e-6, 1e-7)) << "sgd_update";
  }
  Tensor w0 = random_tensor({999}, rng), grad = random_tensor({999}, rng), w1 = up(w0);
  const Tensor gd = up(grad);
  Tensor m0 = Tensor::zeros({999}, DType::f32), v0 = Tensor::zeros({999}, DType::f32);
  Tensor m1 = be().zeros({999}, DType::f32), v1 = be().zeros({999}, DType::f32);
  for (int64_t step = 1; step <= 3; ++step) {
    AdamWParams ap;
    ap.step = step;
    ref().adamw_update(ap, w0, grad, m0, v0);
    be().adamw_update(ap, w1, gd, m1, v1);
  }
  EXPECT_TRUE(all_close(down(w1), w0, 1e-5, 1e-6)) << "adamw_update";
}

TEST_P(OpParity, BatchNormTrainingInferenceAndBackward) {
  Rng rng(1238);
  const BatchNormParams p;
  const Tensor x = random_tensor({4, 3, 5, 6}, rng), gamma = random_tensor({3}, rng), beta = random_tensor({3}, rng);
  const Tensor dy = random_tensor({4, 3, 5, 6}, rng);
  Tensor y0 = Tensor::empty(x.shape(), DType::f32), y1 = be().empty(x.shape(), DType::f32);
  Tensor sm0 = Tensor::empty({3}, DType::f32), si0 = Tensor::empty({3}, DType::f32);
  Tensor sm1 = be().empty({3}, DType::f32), si1 = be().empty({3}, DType::f32);
  Tensor rm0 = Tensor::zeros({3}, DType::f32), rv0 = Tensor::zeros({3}, DType::f32);
  rv0.fill(1.0);
  Tensor rm1 = up(rm0), rv1 = up(rv0);
  const Tensor xd = up(x), gd = up(gamma), bd = up(beta);
  ref().batchnorm_forward_training(p, x, gamma, beta, y0, sm0, si0, rm0, rv0);
  be().batchnorm_forward_training(p, xd, gd, bd, y1, sm1, si1, rm1, rv1);
  EXPECT_TRUE(all_close(down(y1), y0, 1e-4, 1e-5)) << "training forward";
  EXPECT_TRUE(all_close(down(rm1), rm0, 1e-5, 1e-6)) << "running mean";
  EXPECT_TRUE(all_close(down(rv1), rv0, 1e-5, 1e-6)) << "running var";
  Tensor dx0 = Tensor::empty(x.shape(), DType::f32), dx1 = be().empty(x.shape(), DType::f32);
  Tensor dg0 = Tensor::empty({3}, DType::f32), dg1 = be().empty({3}, DType::f32);
  Tensor db0 = Tensor::empty({3}, DType::f32), db1 = be().empty({3}, DType::f32);
  ref().batchnorm_backward(x, dy, gamma, sm0, si0, dx0, dg0, db0);
  be().batchnorm_backward(xd, up(dy), gd, sm1, si1, dx1, dg1, db1);
  EXPECT_TRUE(all_close(down(dx1), dx0, 1e-4, 1e-5)) << "backward data";
  EXPECT_TRUE(all_close(down(dg1), dg0, 1e-4, 1e-4)) << "backward gamma";
  EXPECT_TRUE(all_close(down(db1), db0, 1e-4, 1e-4)) << "backward beta";
  ref().batchnorm_forward_inference(p, x, gamma, beta, rm0, rv0, y0);
  be().batchnorm_forward_inference(p, xd, gd, bd, rm1, rv1, y1);
  EXPECT_TRUE(all_close(down(y1), y0, 1e-4, 1e-5)) << "inference forward";
}

TEST_P(OpParity, ReorderBetweenLayoutsAndToBf16) {
  Rng rng(1239);
  const Tensor a = random_tensor({2, 6, 5, 3}, rng);
  Tensor b = be().empty(a.shape(), DType::f32, MemoryFormat::channels_last);
  be().reorder(up(a), b);
  EXPECT_TRUE(all_close(down(b), a, 0, 0));
  if (!be().supports(Op::reorder, DType::bf16))
    return;
  Tensor h = be().empty(a.shape(), DType::bf16);
  be().reorder(up(a), h);
  EXPECT_TRUE(all_close(down(h), a, 1.0 / 128, 0));
}

// ---------------------------------------------------------------- s8/u8
/// A layer with every feature: zero points, bias, ReLU, quantized or f32 output.
Int8LayerData int8_layer_for(const Tensor& w, const Tensor& b, const QuantParams& src, bool quantized_out, bool relu) {
  Int8LayerConfig cfg;
  cfg.src = src;
  cfg.post = relu ? PostOp::relu : PostOp::none;
  if (quantized_out)
    cfg.dst = make_quant_params(relu ? 0.0 : -3.0, 3.0, 8, false, false);
  cfg.weight_range = Int8WeightRange::reduced;  // exact on every CPU and GPU
  return make_int8_layer(w, &b, cfg);
}

TEST_P(OpParity, Int8Linear) {
  Rng rng(3);
  // Sizes off and on the GPU GEMM's 16-element padding of K and O.
  for (auto [N, K, O] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{6, 37, 9}, {1, 1, 1}, {33, 48, 32}}) {
    const Tensor x = random_tensor({N, K}, rng), w = random_tensor({O, K}, rng), b = random_tensor({O}, rng);
    for (bool is_signed : {false, true})
      for (bool quantized_out : {true, false}) {
        const QuantParams sp = params_of(x, is_signed, /*symmetric=*/is_signed);
        const Int8LayerData L = int8_layer_for(w, b, sp, quantized_out, !is_signed);
        const Tensor q = quantize(x, sp);
        const Tensor want = ref().make_int8_kernel(L)->forward(q);
        const Tensor got = down(be().make_int8_kernel(L)->forward(up(q)));
        expect_close(got, want, 1e-6, 1,
                     "int8 linear " + std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(O) + " " +
                         (is_signed ? "s8" : "u8") + " -> " + std::string(dtype_name(L.dst_dtype())));
      }
  }
}

TEST_P(OpParity, Int8Conv2d) {
  Rng rng(4);
  const ConvParams p{1, 2, 1, 1};
  const Tensor x = random_tensor({2, 5, 7, 6}, rng, DType::f32, MemoryFormat::channels_last);
  const Tensor w = random_tensor({6, 5, 3, 3}, rng), b = random_tensor({6}, rng);
  for (bool is_signed : {false, true})
    for (bool quantized_out : {true, false}) {
      const QuantParams sp = params_of(x, is_signed, /*symmetric=*/is_signed);
      const Int8LayerData L = int8_layer_for(w, b, sp, quantized_out, !is_signed);
      const Tensor q = quantize(x, sp);
      const Tensor want = ref().make_int8_kernel(L, &p)->forward(q);
      const Tensor got = down(be().make_int8_kernel(L, &p)->forward(up(q)));
      Tensor a = Tensor::empty(got.shape(), got.dtype()), e = Tensor::empty(want.shape(), want.dtype());
      got.copy_to(a);
      want.copy_to(e);
      expect_close(
          a, e, 1e-6, 1,
          std::string("int8 conv2d ") + (is_signed ? "s8" : "u8") + " -> " + std::string(dtype_name(L.dst_dtype())));
    }
}

// A single input channel (a first conv): every border of 3x3 and 2x4 windows with padding, strides
// 1 and 2, u8 and s8 sources with non-zero zero points (the padding must add nothing), ReLU or not,
// s8 and u8 outputs, 16 and 48 output channels; equal to the reference to the bit.
TEST_P(OpParity, Int8Conv2dOneInputChannelExactly) {
  Rng rng(44);
  struct Case {
    int64_t O, KH, KW;
    ConvParams p;
  };
  for (const Case& c : {Case{32, 3, 3, {1, 1, 1, 1}}, Case{16, 2, 4, {2, 1, 1, 2}}, Case{48, 3, 3, {2, 2, 0, 0}}})
    for (bool is_signed : {false, true})
      for (bool relu : {false, true}) {
        const Tensor x = random_tensor({5, 1, 11, 9}, rng, DType::f32, MemoryFormat::channels_last, -1, 2);
        const Tensor w = random_tensor({c.O, 1, c.KH, c.KW}, rng), b = random_tensor({c.O}, rng);
        const QuantParams sp = params_of(x, is_signed, /*symmetric=*/false);
        Int8LayerConfig cfg;
        cfg.src = sp;
        cfg.post = relu ? PostOp::relu : PostOp::none;
        cfg.dst = make_quant_params(relu ? 0.0 : -2.0, 2.0, 8, false, /*is_signed=*/!relu);
        const Int8LayerData L = make_int8_layer(w, &b, cfg);
        const Tensor q = quantize(x, sp);
        const Tensor want = ref().make_int8_kernel(L, &c.p)->forward(q);
        const Tensor got = down(be().make_int8_kernel(L, &c.p)->forward(up(q)));
        expect_close(got, want, 0, 0,
                     "int8 conv2d c1 O=" + std::to_string(c.O) + " k" + std::to_string(c.KH) + "x" +
                         std::to_string(c.KW) + (is_signed ? " s8" : " u8") + (relu ? " relu" : ""));
      }
}

// The first conv with the 2x2 max pooling after it fused in, where the backend's kernel can (the cpu
// backend's int8_conv_c1.h on VNNI CPUs): the same integers as the reference conv followed by the
// reference integer pooling (odd output sizes drop their last row / column, as the pooling does),
// for 3x3 and 2x4 windows, strides 1 and 2; an empty batch keeps the pooled shape.
TEST_P(OpParity, Int8Conv2dOneInputChannelWithMaxPoolFused) {
  Rng rng(45);
  const PoolParams pool{2, 2, 2, 2, 0, 0};
  struct Case {
    int64_t O, KH, KW;
    ConvParams p;
    bool relu;
  };
  for (const Case& c : {Case{32, 3, 3, {1, 1, 1, 1}, true}, Case{16, 2, 4, {1, 2, 0, 1}, false},
                        Case{48, 3, 3, {2, 2, 1, 1}, true}})
    for (bool is_signed : {false, true}) {
      const Tensor x = random_tensor({6, 1, 11, 9}, rng, DType::f32, MemoryFormat::channels_last, -1, 2);
      const Tensor w = random_tensor({c.O, 1, c.KH, c.KW}, rng), b = random_tensor({c.O}, rng);
      Int8LayerConfig cfg;
      cfg.src = params_of(x, is_signed, /*symmetric=*/false);
      cfg.post = c.relu ? PostOp::relu : PostOp::none;
      cfg.dst = make_quant_params(c.relu ? 0.0 : -2.0, 2.0, 8, false, /*is_signed=*/is_signed);
      const Int8LayerData L = make_int8_layer(w, &b, cfg);
      const Tensor q = quantize(x, cfg.src);
      auto kernel = be().make_int8_kernel(L, &c.p);
      if (!kernel->fuse_maxpool(pool))
        GTEST_SKIP() << GetParam() << " backend's kernel " << kernel->implementation() << " does not fuse pooling";
      ASSERT_NE(kernel->fused_maxpool(), nullptr);
      const Tensor conv = ref().make_int8_kernel(L, &c.p)->forward(q);
      const Shape pooled{6, c.O, conv.dim(2) / 2, conv.dim(3) / 2};
      Tensor want = Tensor::empty(pooled, conv.dtype(), Device::cpu(), MemoryFormat::channels_last);
      ref().int8_maxpool2d(pool, conv, want);
      const Tensor got = down(kernel->forward(up(q)));
      expect_close(got, want, 0, 0,
                   "int8 conv2d c1 + maxpool O=" + std::to_string(c.O) + " k" + std::to_string(c.KH) + "x" +
                       std::to_string(c.KW) + (is_signed ? " s8" : " u8"));
      const Tensor none =
          kernel->forward(up(Tensor::empty({0, 1, 11, 9}, q.dtype(), Device::cpu(), MemoryFormat::channels_last)));
      EXPECT_EQ(none.shape(), (Shape{0, c.O, pooled[2], pooled[3]}));
    }
}

// The model input's quantize step: a batch large enough to be split between threads, an odd tail,
// values exactly halfway between two integers (round half to even), NaN, infinities and values
// far outside the range; contiguous [N, 1, H, W] into channels-last (the same bytes for C = 1).
TEST_P(OpParity, QuantizeBatchExactlyWithTiesAndSpecials) {
  Rng rng(21);
  const Shape shape{3, 1, 97, 263};
  const Tensor clean = random_tensor(shape, rng, DType::f32, MemoryFormat::contiguous, -1, 2);
  for (bool is_signed : {false, true}) {
    const QuantParams p = params_of(clean, is_signed, /*symmetric=*/is_signed);
    Tensor x = Tensor::empty(shape, DType::f32, Device::cpu());
    clean.copy_to(x);
    float* v = static_cast<float*>(x.raw());
    for (int64_t i = 0; i < x.numel(); i += 7)
      v[i] = static_cast<float>((static_cast<double>(i % 41) - 20.5) * p.scale[0]);  // ties
    v[1] = std::nanf("");
    v[2] = INFINITY;
    v[3] = -INFINITY;
    v[4] = 1e30f;
    v[5] = -1e30f;
    Tensor want = Tensor::empty(shape, p.storage_dtype(), Device::cpu(), MemoryFormat::channels_last);
    ref().quantize(x, p, want);
    Tensor q = be().empty(shape, p.storage_dtype(), MemoryFormat::channels_last);
    be().quantize(up(x), p, q);
    expect_close(down(q), want, 0, 0, std::string("quantize batch ") + (is_signed ? "s8" : "u8"));
  }
}

TEST_P(OpParity, QuantizeMaxPoolAndRelu) {
  Rng rng(5);
  const Tensor x = random_tensor({2, 4, 7, 5}, rng, DType::f32, MemoryFormat::channels_last, -1, 2);
  for (bool is_signed : {false, true}) {
    const QuantParams p = params_of(x, is_signed, false);
    Tensor want = Tensor::empty(x.shape(), p.storage_dtype(), Device::cpu(), MemoryFormat::channels_last);
    ref().quantize(x, p, want);
    Tensor q = be().empty(x.shape(), p.storage_dtype(), MemoryFormat::channels_last);
    be().quantize(up(x), p, q);
    expect_close(down(q), want, 0, 0, "quantize");

    const PoolParams pp{3, 3, 2, 2, 1, 1};
    const Shape out{2, 4, conv_out_size(7, 3, 2, 1), conv_out_size(5, 3, 2, 1)};
    Tensor pw = Tensor::empty(out, want.dtype(), Device::cpu(), MemoryFormat::channels_last);
    ref().int8_maxpool2d(pp, want, pw);
    Tensor pg = be().empty(out, want.dtype(), MemoryFormat::channels_last);
    be().int8_maxpool2d(pp, q, pg);
    expect_close(down(pg), pw, 0, 0, "int8 maxpool2d");

    // The cnn's 2x2 stride-2 window (the cpu backend's fast path), on an odd 7 x 5 input (the last
    // row and column are dropped) and on 32 channels (whole vectors).
    for (const Shape& shape : {Shape{2, 4, 7, 5}, Shape{3, 32, 8, 6}}) {
      Rng r2(11);
      const Tensor x2 = random_tensor(shape, r2, DType::f32, MemoryFormat::channels_last, -1, 2);
      const QuantParams p2 = params_of(x2, is_signed, false);
      const Tensor q2 = quantize(x2, p2);
      const PoolParams pp2{2, 2, 2, 2, 0, 0};
      const Shape out2{shape[0], shape[1], shape[2] / 2, shape[3] / 2};
      Tensor w2 = Tensor::empty(out2, q2.dtype(), Device::cpu(), MemoryFormat::channels_last);
      ref().int8_maxpool2d(pp2, q2, w2);
      Tensor g2 = be().empty(out2, q2.dtype(), MemoryFormat::channels_last);
      be().int8_maxpool2d(pp2, up(q2), g2);
      expect_close(down(g2), w2, 0, 0, "int8 maxpool2d 2x2 s2 " + shape_str(shape));
    }

    ref().int8_relu(pw, p.zero_point[0]);
    be().int8_relu(pg, p.zero_point[0]);
    expect_close(down(pg), pw, 0, 0, "int8 relu");
  }
}

// ---------------------------------------------------------------- CSR
TEST_P(OpParity, SparseMatmul) {
  Rng rng(6);
  struct Case {
    int64_t rows, cols, n;
    double density;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1, 1.0},
                                         {7, 13, 5, 0.3},
                                         {64, 288, 196, 0.2},
                                         {256, 784, 256, 0.05},
                                         {33, 17, 130, 0.95},
                                         {12, 50, 16, 0.0},
                                         {1, 1, 7, 0.0}}) {
    SCOPED_TRACE(testing::Message() << c.rows << "x" << c.cols << " n=" << c.n << " density " << c.density);
    Tensor w = Tensor::zeros({c.rows, c.cols}, DType::f32);
    for (int64_t i = 0; i < w.numel(); ++i)
      if (rng.uniform(0, 1) < c.density)
        w.set_flat(i, rng.normal());
    const CsrMatrix a = CsrMatrix::from_dense(w);
    const Tensor bm = random_tensor({c.cols, c.n}, rng), bias = random_tensor({c.rows}, rng);
    const Tensor bd = up(bm), biasd = up(bias);
    for (bool with_bias : {false, true})
      for (bool relu : {false, true}) {
        const PostOp post = relu ? PostOp::relu : PostOp::none;
        Tensor want = Tensor::empty({c.rows, c.n}, DType::f32);
        ref().make_sparse_matmul(a)->run(bm, with_bias ? &bias : nullptr, want, post);
        Tensor poisoned = Tensor::empty({c.rows, c.n}, DType::f32);
        poisoned.fill(std::nan(""));  // an element the op does not write fails
        Tensor got = up(poisoned);
        be().make_sparse_matmul(a)->run(bd, with_bias ? &biasd : nullptr, got, post);
        expect_close(down(got), want, 1e-5, 0,
                     std::string("sparse_matmul") + (with_bias ? " + bias" : "") + (relu ? " + relu" : ""));
      }
  }
}

// ---------------------------------------------------------------- the contract, once for all
TEST_P(OpParity, BadShapesAreRefusedNamingTheOpAndShapes) {
  Rng rng(7);
  const auto refused = [](const std::function<void()>& call, const std::string& op, const std::string& shape) {
    try {
      call();
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(op), std::string::npos) << what;
      EXPECT_NE(what.find(shape), std::string::npos) << what;
      return;
    }
    ADD_FAILURE() << op << " accepted shape " << shape;
  };
  const Tensor x = up(random_tensor({4, 6}, rng)), w = up(random_tensor({3, 5}, rng));
  Tensor y = be().empty({4, 3}, DType::f32);
  refused([&] { be().linear_forward(x, w, nullptr, y); }, "linear_forward", "[4, 6]");

  const Tensor cx = up(random_tensor({1, 2, 5, 5}, rng)), cw = up(random_tensor({3, 4, 3, 3}, rng));
  Tensor cy = be().empty({1, 3, 3, 3}, DType::f32);
  refused([&] { be().conv2d_forward(ConvParams{}, cx, cw, nullptr, cy); }, "conv2d_forward", "[3, 4, 3, 3]");
  Tensor dx = be().empty({4, 6}, DType::f32);
  refused([&] { be().linear_backward_data(y, w, dx); }, "linear_backward_data", "[4, 6]");
  Tensor dw = be().empty({3, 5}, DType::f32);
  refused([&] { be().linear_backward_weights(x, y, dw, nullptr); }, "linear_backward_weights", "[3, 5]");
  Tensor cdx = be().empty({1, 2, 5, 5}, DType::f32);
  refused([&] { be().conv2d_backward_data(ConvParams{}, cy, cw, cdx); }, "conv2d_backward_data", "[3, 4, 3, 3]");
  Tensor cdw = be().empty({3, 4, 3, 3}, DType::f32);
  refused([&] { be().conv2d_backward_weights(ConvParams{}, cx, cy, cdw, nullptr); }, "conv2d_backward_weights",
          "[3, 4, 3, 3]");

  Int8LayerConfig cfg;
  cfg.src = make_quant_params(-1, 1);
  const Int8LayerData L = make_int8_layer(random_tensor({3, 5}, rng), nullptr, cfg);
  std::unique_ptr<Int8Kernel> k = be().make_int8_kernel(L);
  const Tensor bad = up(quantize(random_tensor({2, 4}, rng), cfg.src));
  refused([&] { k->forward(bad); }, "int8 linear", "[2, 4]");
  const ConvParams unit;
  refused([&] { be().make_int8_kernel(L, &unit); }, "int8 conv2d", "[3, 5]");

  const CsrMatrix a = CsrMatrix::from_dense(random_tensor({3, 5}, rng));
  std::unique_ptr<SparseMatmulKernel> s = be().make_sparse_matmul(a);
  const Tensor b = up(random_tensor({4, 2}, rng));
  Tensor c = be().empty({3, 2}, DType::f32);
  refused([&] { s->run(b, nullptr, c); }, "sparse_matmul", "[4, 2]");

  // The lighter ops: one bad shape or dtype each, refused before any backend runs.
  const Tensor a4 = up(random_tensor({2, 3}, rng)), a5 = up(random_tensor({2, 4}, rng));
  Tensor d4 = be().empty({2, 3}, DType::f32), d5 = be().empty({2, 4}, DType::f32);
  refused([&] { be().relu_forward(a4, d5); }, "relu_forward", "[2, 4]");
  refused([&] { be().relu_backward(a4, a5, d4); }, "relu_backward", "[2, 4]");
  refused([&] { be().add(a4, a5, d4); }, "add", "[2, 4]");
  refused([&] { be().axpy(0.5, a5, d4); }, "axpy", "[2, 4]");
  Tensor labels_as_data = be().empty({2, 3}, DType::s32);
  refused([&] { be().scale(labels_as_data, 2.0); }, "scale", "s32");
  refused([&] { be().add(a4, labels_as_data, d4); }, "add", "s32");

  const PoolParams pool{2, 2, 2, 2, 0, 0};
  const Tensor px = up(random_tensor({1, 2, 4, 4}, rng));
  Tensor py = be().empty({1, 2, 3, 3}, DType::f32), pws;
  refused([&] { be().maxpool2d_forward(pool, px, py, pws); }, "maxpool2d_forward", "[1, 2, 3, 3]");
  Tensor pdx = be().empty({1, 2, 4, 4}, DType::f32);
  refused([&] { be().maxpool2d_backward(pool, py, pws, pdx); }, "maxpool2d_backward", "[1, 2, 3, 3]");

  const Tensor bx = up(random_tensor({2, 3, 2, 2}, rng));
  Tensor by = be().empty({2, 3, 2, 2}, DType::f32), bdx = be().empty({2, 3, 2, 2}, DType::f32);
  Tensor c3 = be().zeros({3}, DType::f32), c4 = be().zeros({4}, DType::f32);
  Tensor c3b = be().zeros({3}, DType::f32), c3c = be().zeros({3}, DType::f32), c3d = be().zeros({3}, DType::f32);
  refused([&] { be().batchnorm_forward_training({}, bx, c3, c4, by, c3b, c3c, c3d, c3d); },
          "batchnorm_forward_training", "[4]");
  refused([&] { be().batchnorm_forward_inference({}, bx, c3, c3, c4, c3, by); }, "batchnorm_forward_inference", "[4]");
  refused([&] { be().batchnorm_backward(bx, a4, c3, c3b, c3c, bdx, c3d, c3d); }, "batchnorm_backward", "[2, 3]");
  refused([&] { be().batchnorm_backward(bx, by, c3, c3b, c3c, bdx, c4, c3d); }, "batchnorm_backward", "[4]");

  Tensor mask;
  refused([&] { be().dropout_forward(0.5, 1, a4, d5, mask); }, "dropout_forward", "[2, 4]");
  refused([&] { be().dropout_forward(1.5, 1, a4, d4, mask); }, "dropout_forward", "1.5");
  const Tensor mask4 = be().zeros({2, 4}, DType::u8);
  refused([&] { be().dropout_backward(0.5, a4, mask4, d4); }, "dropout_backward", "[2, 4]");

  const Tensor labels = up(Tensor::zeros({3}, DType::s32));
  refused([&] { be().softmax_cross_entropy(a4, labels, nullptr, 1.0); }, "softmax_cross_entropy", "[3]");
  refused([&] { be().softmax_cross_entropy(a4, labels_as_data, nullptr, 1.0); }, "softmax_cross_entropy", "[2, 3]");
  Tensor g5 = be().empty({2, 4}, DType::f32);
  refused([&] { be().softmax_cross_entropy(a4, up(Tensor::zeros({2}, DType::s32)), &g5, 1.0); },
          "softmax_cross_entropy", "[2, 4]");

  Tensor param = up(random_tensor({2, 3}, rng)), m3 = be().zeros({2, 3}, DType::f32);
  Tensor m4 = be().zeros({2, 4}, DType::f32);
  refused([&] { be().sgd_update({}, param, a5, m3); }, "sgd_update", "[2, 4]");
  SgdParams momentum;
  momentum.momentum = 0.9;
  refused([&] { be().sgd_update(momentum, param, a4, m4); }, "sgd_update", "[2, 4]");
  refused([&] { be().adamw_update({}, param, a4, m3, m4); }, "adamw_update", "[2, 4]");

  Tensor undefined;
  refused([&] { be().sum(undefined); }, "sum", "undefined");
  refused([&] { be().sum_squares(undefined); }, "sum_squares", "undefined");
  refused([&] { be().copy(a4, g5); }, "copy", "[2, 4]");
  Tensor bf = be().empty({2, 3}, DType::bf16);
  refused([&] { be().copy(a4, bf); }, "copy", "bf16");
  refused([&] { be().reorder(a4, g5); }, "reorder", "[2, 4]");
}

#ifdef LATHE_OP_PARITY_CUDA_ONLY  // the copy compiled into test_gpu (label gpu, scripts/gpu-check.sh)
INSTANTIATE_TEST_SUITE_P(Cuda, OpParity, ::testing::Values("cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
#else
INSTANTIATE_TEST_SUITE_P(EveryBackend, OpParity, ::testing::Values("reference", "cpu", "cuda"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
#endif

}  // namespace
}  // namespace lathe
