// INT8 linear and conv2d through oneDNN (the cpu backend's make_int8_kernel) against the integer reference loops (exact
// or 1 LSB) and against the f32 op in double precision, within a worst-case quantization error bound computed per
// output element:  sum_k (|x_k| s_w/2 + |w_k| s_x/2 + s_x s_w/4) + s_y/2 (+ s_y for 1 LSB).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/cpu/reference_int8.h"
#include "engine/compress/quant/observer.h"
#include "tests/support/int8_kernels.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::Int8Conv2d;
using test::Int8Linear;
using test::random_tensor;

enum class SrcMode { s8_symmetric, u8_symmetric, u8_asymmetric };
enum class DstMode { f32, s8, u8_relu, u8_asymmetric };

const char* name(SrcMode m) {
  return m == SrcMode::s8_symmetric ? "src s8" : m == SrcMode::u8_symmetric ? "src u8" : "src u8+zp";
}
const char* name(DstMode m) {
  return m == DstMode::f32       ? "dst f32"
         : m == DstMode::s8      ? "dst s8"
         : m == DstMode::u8_relu ? "dst u8 relu"
                                 : "dst u8+zp";
}

/// Inputs for a src mode: u8 symmetric wants x >= 0 (a ReLU output); asymmetric gets a shifted range.
std::pair<double, double> src_range(SrcMode m) {
  return m == SrcMode::s8_symmetric   ? std::pair{-1.0, 1.0}
         : m == SrcMode::u8_symmetric ? std::pair{0.0, 1.5}
                                      : std::pair{-0.4, 1.7};
}

QuantParams src_params(SrcMode m, const Tensor& x) {
  MinMaxObserver obs;
  obs.observe(x);
  return m == SrcMode::s8_symmetric   ? obs.params(8, true, true)
         : m == SrcMode::u8_symmetric ? obs.params(8, true, false)
                                      : obs.params(8, false, false);
}

/// The f32 result (double precision, from the original f32 x and w) and the error bound per element.
struct Expected {
  std::vector<double> y, bound;
};

Int8LayerConfig config_for(SrcMode sm, DstMode dm, const Tensor& x, const Expected& e) {
  Int8LayerConfig cfg;
  cfg.src = src_params(sm, x);
  cfg.post = dm == DstMode::u8_relu ? PostOp::relu : PostOp::none;
  double lo = 1e30, hi = -1e30;
  for (double v : e.y) {
    const double r = cfg.post == PostOp::relu ? std::max(v, 0.0) : v;
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  if (dm == DstMode::s8)
    cfg.dst = make_quant_params(lo, hi, 8, true, true);
  if (dm == DstMode::u8_relu)
    cfg.dst = make_quant_params(0.0, hi, 8, true, false);
  if (dm == DstMode::u8_asymmetric)
    cfg.dst = make_quant_params(lo, hi, 8, false, false);
  return cfg;
}

/// Compares oneDNN with the reference (exact, or 1 LSB on quantized outputs) and oneDNN with the
/// f32 result within the bound; `e` is in the outputs' logical row-major order.
void check_outputs(const Int8LayerData& L, const Tensor& onednn, const Tensor& ref, const Expected& e,
                   const std::string& what) {
  ASSERT_EQ(onednn.shape(), ref.shape()) << what;
  ASSERT_EQ(onednn.dtype(), L.dst_dtype()) << what;
  const double sy = L.config.dst ? L.config.dst->scale[0] : 0.0;
  const int32_t zy = L.config.dst ? L.config.dst->zero_point[0] : 0;
  const int64_t O = L.out_channels();
  int64_t off_by_one = 0;
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = onednn.at_flat(i), b = ref.at_flat(i);
    if (L.config.dst) {
      ASSERT_LE(std::fabs(a - b), 1.0) << what << " element " << i;
      off_by_one += a != b;
    } else {
      ASSERT_NEAR(a, b, 1e-6 * (std::fabs(b) + 1)) << what << " element " << i;
    }
    // Logical order [.., O] (linear) or [N, O, OH, OW] (conv): the expected values use the same.
    const double deq = L.config.dst ? (a - zy) * sy : a;
    double want = e.y[i];
    if (L.config.post == PostOp::relu)
      want = std::max(want, 0.0);
    ASSERT_LE(std::fabs(deq - want), e.bound[i] + 1.5 * sy + 1e-5 * (std::fabs(want) + 1))
        << what << " element " << i << " (channel "
        << (ref.ndim() == 2 ? i % O : (i / (ref.numel() / ref.dim(0) / O)) % O) << ")";
    err2 += (deq - want) * (deq - want);
    ref2 += want * want;
  }
  // Typical error far below the worst case: relative RMS under 2% for 8-bit.
  if (ref.numel() >= 16)
    EXPECT_LT(std::sqrt(err2 / ref2), 0.02) << what;
  EXPECT_LE(off_by_one, std::max<int64_t>(2, ref.numel() / 100)) << what << ": 1-LSB differences";
}

Expected linear_expected(const Tensor& x, const Tensor& w, const Tensor* b, const QuantParams& sx,
                         const QuantParams& sw) {
  const int64_t N = x.dim(0), K = x.dim(1), O = w.dim(0);
  Expected e{std::vector<double>(N * O), std::vector<double>(N * O)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double acc = b ? b->get({o}) : 0.0, bound = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double xv = x.get({n, k}), wv = w.get({o, k});
        acc += xv * wv;
        bound += std::fabs(xv) * sw.scale[o] / 2 + std::fabs(wv) * sx.scale[0] / 2 + sx.scale[0] * sw.scale[o] / 4;
      }
      e.y[n * O + o] = acc;
      e.bound[n * O + o] = bound;
    }
  return e;
}

QuantParams weight_params(const Tensor& w) {
  MinMaxObserver obs(0);
  obs.observe(w);
  return obs.params(8, true, true);
}

TEST(Int8Linear, MatchesReferenceAndF32OnOddShapes) {
  Rng rng(31);
  for (auto [N, K, O] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {64, 784, 10}}) {
    const Tensor w = random_tensor({O, K}, rng, DType::f32, MemoryFormat::contiguous, -0.3, 0.3);
    const Tensor b = random_tensor({O}, rng, DType::f32, MemoryFormat::contiguous, -0.5, 0.5);
    for (SrcMode sm : {SrcMode::s8_symmetric, SrcMode::u8_symmetric, SrcMode::u8_asymmetric}) {
      const auto [lo, hi] = src_range(sm);
      const Tensor x = random_tensor({N, K}, rng, DType::f32, MemoryFormat::contiguous, lo, hi);
      for (DstMode dm : {DstMode::f32, DstMode::s8, DstMode::u8_relu, DstMode::u8_asymmetric}) {
        for (bool with_bias : {true, false}) {
          const Tensor* bias = with_bias ? &b : nullptr;
          const QuantParams sx = src_params(sm, x);
          const Expected e = linear_expected(x, w, bias, sx, weight_params(w));
          Int8Linear op(w, bias, config_for(sm, dm, x, e));
          const Tensor xq = quantize(x, op.src_params());
          const std::string what = std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(O) + " " +
                                   name(sm) + " " + name(dm) + (with_bias ? " bias" : "");
          // The bound with the weights the layer really uses (7 bits on CPUs without VNNI).
          const Expected eb = linear_expected(x, w, bias, sx, op.layer().weights);
          check_outputs(op.layer(), op.forward(xq), op.forward_reference(xq), eb, what);
          EXPECT_FALSE(op.implementation().empty());
        }
      }
    }
  }
}

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad;
};

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.at_flat(i);  // logical row-major order
  return v;
}

/// f32 conv in double over [N, O, OH, OW] (logical order), bias included when given.
Expected conv_expected(const ConvCase& cc, const Tensor& x_t, const Tensor& w_t, const Tensor* b, const QuantParams& sx,
                       const QuantParams& sw) {
  const int64_t OH = conv_out_size(cc.h, cc.k, cc.stride, cc.pad), OW = conv_out_size(cc.w, cc.k, cc.stride, cc.pad);
  const std::vector<double> x = values(x_t), w = values(w_t);
  Expected e{std::vector<double>(cc.n * cc.o * OH * OW), std::vector<double>(cc.n * cc.o * OH * OW)};
  int64_t i = 0;
  for (int64_t n = 0; n < cc.n; ++n)
    for (int64_t o = 0; o < cc.o; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow, ++i) {
          double acc = b ? b->get({o}) : 0.0, ax = 0, aw = 0, terms = 0;
          for (int64_t c = 0; c < cc.c; ++c)
            for (int64_t kh = 0; kh < cc.k; ++kh)
              for (int64_t kw = 0; kw < cc.k; ++kw) {
                const int64_t ih = oh * cc.stride - cc.pad + kh, iw = ow * cc.stride - cc.pad + kw;
                if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w)
                  continue;
                const double xv = x[((n * cc.c + c) * cc.h + ih) * cc.w + iw];
                const double wv = w[((o * cc.c + c) * cc.k + kh) * cc.k + kw];
                acc += xv * wv;
                ax += std::fabs(xv);
                aw += std::fabs(wv);
                terms += 1;
              }
          e.y[i] = acc;
          e.bound[i] = ax * sw.scale[o] / 2 + aw * sx.scale[0] / 2 + terms * sx.scale[0] * sw.scale[o] / 4;
        }
  return e;
}

TEST(Int8Conv2d, MatchesReferenceAndF32OnOddShapes) {
  Rng rng(41);
  const std::vector<ConvCase> cases = {{2, 1, 28, 28, 32, 3, 1, 1}, {3, 32, 14, 14, 64, 3, 1, 1},
                                       {1, 3, 7, 9, 5, 3, 2, 0},    {2, 5, 11, 6, 7, 1, 1, 0},
                                       {4, 16, 9, 9, 8, 5, 2, 2},   {1, 3, 5, 5, 4, 3, 1, 2}};
  for (const ConvCase& cc : cases) {
    const ConvParams p{cc.stride, cc.stride, cc.pad, cc.pad};
    const Tensor w = random_tensor({cc.o, cc.c, cc.k, cc.k}, rng, DType::f32, MemoryFormat::contiguous, -0.3, 0.3);
    const Tensor b = random_tensor({cc.o}, rng, DType::f32, MemoryFormat::contiguous, -0.5, 0.5);
    for (SrcMode sm : {SrcMode::s8_symmetric, SrcMode::u8_symmetric, SrcMode::u8_asymmetric}) {
      const auto [lo, hi] = src_range(sm);
      const Tensor x = random_tensor({cc.n, cc.c, cc.h, cc.w}, rng, DType::f32, MemoryFormat::channels_last, lo, hi);
      for (DstMode dm : {DstMode::f32, DstMode::s8, DstMode::u8_relu, DstMode::u8_asymmetric}) {
        const bool with_bias = dm != DstMode::s8;
        const Tensor* bias = with_bias ? &b : nullptr;
        const Expected e = conv_expected(cc, x, w, bias, src_params(sm, x), weight_params(w));
        Int8Conv2d op(p, w, bias, config_for(sm, dm, x, e));
        const Expected eb = conv_expected(cc, x, w, bias, src_params(sm, x), op.layer().weights);
        const Tensor xq = quantize(x, op.src_params());
        ASSERT_TRUE(xq.is_channels_last());
        const Tensor y = op.forward(xq);
        EXPECT_TRUE(y.is_channels_last());
        const std::string what = "conv c" + std::to_string(cc.c) + " " + std::to_string(cc.h) + "x" +
                                 std::to_string(cc.w) + " o" + std::to_string(cc.o) + " k" + std::to_string(cc.k) +
                                 " s" + std::to_string(cc.stride) + " p" + std::to_string(cc.pad) + " " + name(sm) +
                                 " " + name(dm);
        check_outputs(op.layer(), y, op.forward_reference(xq), eb, what);
        // The reference loops take any layout and give the same integers from NCHW input (the op
        // contract asks every backend for channels-last).
        Tensor xq_nchw = Tensor::empty(xq.shape(), xq.dtype());
        xq.copy_to(xq_nchw);
        const Tensor r2 = int8_conv2d_reference(op.layer(), p, xq_nchw), r1 = op.forward_reference(xq);
        for (int64_t i = 0; i < r1.numel(); ++i)
          ASSERT_EQ(r1.at_flat(i), r2.at_flat(i)) << what;
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
bool cpu_has_vnni() { return __builtin_cpu_supports("avx512vnni"); }
#else
bool cpu_has_vnni() { return false; }
#endif

TEST(Int8Ops, RunsOptimisedKernelsOnVnniCpus) {
  if (!cpu_has_vnni())
    GTEST_SKIP() << "CPU without AVX-512 VNNI: oneDNN may pick other int8 kernels";
  Rng rng(3);
  const Tensor w = random_tensor({64, 32, 3, 3}, rng), b = random_tensor({64}, rng);
  const Tensor x = random_tensor({8, 32, 14, 14}, rng, DType::f32, MemoryFormat::channels_last, 0, 1);
  Int8LayerConfig cfg;
  cfg.src = make_quant_params(0, 1, 8, true, false);
  cfg.dst = make_quant_params(0, 4, 8, true, false);
  cfg.post = PostOp::relu;
  Int8Conv2d conv({1, 1, 1, 1}, w, &b, cfg);
  conv.forward(quantize(x, cfg.src));
  const Tensor lw = random_tensor({10, 784}, rng),
               lx = random_tensor({64, 784}, rng, DType::f32, MemoryFormat::contiguous, 0, 1);
  cfg.dst.reset();
  cfg.post = PostOp::none;
  Int8Linear lin(lw, nullptr, cfg);
  lin.forward(quantize(lx, cfg.src));
  ::testing::Test::RecordProperty("conv_impl", conv.implementation());
  ::testing::Test::RecordProperty("matmul_impl", lin.implementation());
  EXPECT_EQ(conv.implementation().find("ref"), std::string::npos) << conv.implementation();
  EXPECT_EQ(lin.implementation().find("ref"), std::string::npos) << lin.implementation();
  EXPECT_NE(conv.implementation().find("avx512"), std::string::npos) << conv.implementation();
  EXPECT_NE(lin.implementation().find("avx512"), std::string::npos) << lin.implementation();
}

TEST(Int8Ops, RejectsWrongInputs) {
  Rng rng(4);
  const Tensor w = random_tensor({4, 3, 3, 3}, rng);
  Int8LayerConfig cfg;
  cfg.src = make_quant_params(-1, 1);
  Int8Conv2d conv({1, 1, 1, 1}, w, nullptr, cfg);
  const Tensor x = random_tensor({1, 3, 5, 5}, rng);        // NCHW
  EXPECT_THROW(conv.forward(quantize(x, cfg.src)), Error);  // not channels-last
  const Tensor xl = random_tensor({1, 3, 5, 5}, rng, DType::f32, MemoryFormat::channels_last);
  EXPECT_THROW(conv.forward(quantize(xl, make_quant_params(0, 1, 8, true, false))), Error);  // u8 for s8
  EXPECT_THROW(conv.forward(random_tensor({1, 3, 5, 5}, rng, DType::f32, MemoryFormat::channels_last)), Error);
  Int8LayerConfig per_channel = cfg;
  per_channel.src = make_quant_params_per_channel({-1, -1}, {1, 1}, 1);
  EXPECT_THROW(Int8Linear(random_tensor({2, 2}, rng), nullptr, per_channel), Error);
  EXPECT_THROW(Int8Linear(w, nullptr, cfg), Error);  // 4-D weights
  Int8Linear lin(random_tensor({2, 5}, rng), nullptr, cfg);
  EXPECT_THROW(lin.forward(quantize(random_tensor({3, 4}, rng), cfg.src)), Error);  // K mismatch
}

}  // namespace
}  // namespace lathe
