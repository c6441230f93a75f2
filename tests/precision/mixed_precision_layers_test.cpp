// Linear and Conv2d at bf16/f16 (f32 master weights) against the f64 reference, on the reference and
// oneDNN backends. Two checks per result: (1) within the low-precision error bound of the exact f64
// result of the unrounded f32 operands, and not within the f32 bound (so the rounding really
// happens); (2) tightly equal to the f64 result of the operands rounded by the independent
// reference rounding, then rounded once more (the value a bf16/f16 op with f32 accumulation writes).
// Plus the native oneDNN bf16 path against the reference on bf16 tensors, where the CPU has one.
#include <gtest/gtest.h>

#include <functional>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"
#include "tests/precision/rounding_reference.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::random_tensor;

double unit_roundoff(DType p) { return p == DType::bf16 ? 0x1p-9 : 0x1p-11; }

float round_ref(DType p, float x) {
  return p == DType::bf16 ? test::reference_round_bf16(x) : test::reference_round_f16(x);
}

/// f64 copy; with `p` != f32 each element is first rounded to `p` by the independent reference.
Tensor f64_of(const Tensor& t, DType p = DType::f32, bool absolute = false) {
  Tensor out = Tensor::empty(t.shape(), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = static_cast<float>(t.at_flat(i));
    const double v = p == DType::f32 ? x : round_ref(p, x);
    out.set_flat(i, absolute ? std::fabs(v) : v);
  }
  return out;
}

struct Check {
  std::string what;
  const Tensor* got;  // f32, from the mixed-precision layer
  Tensor exact;       // f64 from unrounded operands
  Tensor magnitude;   // f64 sum of |products| (from |operands|), for the bounds
  Tensor rounded;     // f64 from rounded operands, before the final rounding
  int64_t terms;      // length of each dot product
};

void verify(const Check& c, DType p) {
  const double u = unit_roundoff(p);
  const double f32_acc = static_cast<double>(c.terms + 2) * 0x1p-24;  // f32 summation, generous
  double max_err_vs_f32_bound = 0;
  for (int64_t i = 0; i < c.got->numel(); ++i) {
    const double got = c.got->at_flat(i), exact = c.exact.at_flat(i), mag = c.magnitude.at_flat(i);
    // (1) operand rounding (2u + u^2 per product), f32 accumulation, one final rounding.
    const double bound = (2 * u + u * u + f32_acc) * mag * (1 + u) + u * std::fabs(exact) + 1e-30;
    ASSERT_LE(std::fabs(got - exact), bound) << c.what << " element " << i << " (" << dtype_name(p) << ")";
    max_err_vs_f32_bound = std::max(max_err_vs_f32_bound, std::fabs(got - exact) / (f32_acc * mag + 1e-30));
    // (2) the rounded-operand result, then rounded to p: equal up to f32 summation order, which can
    // move the final rounding by at most one ulp of p.
    const double pre = c.rounded.at_flat(i);
    const double want = round_ref(p, static_cast<float>(pre));
    const double tight = f32_acc * mag + 2 * u * std::fabs(want) + 1e-30;
    ASSERT_LE(std::fabs(got - want), tight) << c.what << " element " << i << " (" << dtype_name(p) << ")";
  }
  // Low precision must show: somewhere the error is far beyond what f32 alone could explain.
  EXPECT_GT(max_err_vs_f32_bound, 10.0) << c.what << ": no " << dtype_name(p) << " rounding visible";
}

struct Setup {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
  MemoryFormat act_format;
};

class MixedPrecisionLayers : public ::testing::TestWithParam<std::tuple<DType, int>> {
 protected:
  std::unique_ptr<Backend> be;
  DType p = DType::bf16;
  MemoryFormat fmt = MemoryFormat::contiguous;
  ReferenceBackend ref;
  Rng rng{99};
  void SetUp() override {
    p = std::get<0>(GetParam());
    if (std::get<1>(GetParam()) == 0) {
      be = std::make_unique<ReferenceBackend>();
    } else {
      be = std::make_unique<DnnlBackend>();
      fmt = MemoryFormat::channels_last;
    }
  }
};

TEST_P(MixedPrecisionLayers, LinearForwardBackward) {
  const int64_t N = 9, K = 67, O = 13;
  Linear lin(K, O);
  lin.create_params(*be, DType::f32, rng);
  lin.set_compute_precision(p);
  Tensor& w = lin.params()[0]->value;
  Tensor& b = lin.params()[1]->value;
  const Tensor x = random_tensor({N, K}, rng),
               dy = random_tensor({N, O}, rng, DType::f32, MemoryFormat::contiguous, -0.5, 0.5);
  Tensor y = Tensor::empty({N, O}, DType::f32), dx = Tensor::empty({N, K}, DType::f32);
  LayerContext ctx{*be, true, 0};
  lin.forward(ctx, {&x}, y);
  lin.backward(ctx, {&x}, y, dy, {&dx});

  // f64 oracles on the reference backend.
  auto fwd = [&](const Tensor& xx, const Tensor& ww, const Tensor* bb) {
    Tensor out = Tensor::empty({N, O}, DType::f64);
    ref.linear_forward(xx, ww, bb, out, PostOp::none);
    return out;
  };
  const Tensor b64 = f64_of(b), babs = f64_of(b, DType::f32, true), b_zero = Tensor::zeros({O}, DType::f64);
  Check cy{"linear dst",
           &y,
           fwd(f64_of(x), f64_of(w), &b64),
           fwd(f64_of(x, DType::f32, true), f64_of(w, DType::f32, true), &babs),
           fwd(f64_of(x, p), f64_of(w, p), &b64),
           K + 1};
  verify(cy, p);

  auto bwd_data = [&](const Tensor& d, const Tensor& ww) {
    Tensor out = Tensor::empty({N, K}, DType::f64);
    ref.linear_backward_data(d, ww, out);
    return out;
  };
  Check cdx{"linear diff_src",
            &dx,
            bwd_data(f64_of(dy), f64_of(w)),
            bwd_data(f64_of(dy, DType::f32, true), f64_of(w, DType::f32, true)),
            bwd_data(f64_of(dy, p), f64_of(w, p)),
            O};
  verify(cdx, p);

  auto bwd_w = [&](const Tensor& xx, const Tensor& d) {
    Tensor out = Tensor::empty({O, K}, DType::f64);
    ref.linear_backward_weights(xx, d, out, nullptr);
    return out;
  };
  Check cdw{"linear diff_weights",
            &lin.params()[0]->grad,
            bwd_w(f64_of(x), f64_of(dy)),
            bwd_w(f64_of(x, DType::f32, true), f64_of(dy, DType::f32, true)),
            bwd_w(f64_of(x, p), f64_of(dy, p)),
            N};
  verify(cdw, p);
}

TEST_P(MixedPrecisionLayers, ConvForwardBackward) {
  const int64_t N = 2, C = 5, H = 7, W = 6, O = 4, Kk = 3;
  Conv2d conv(C, O, Kk, 1, 1);
  conv.create_params(*be, DType::f32, rng);
  conv.set_compute_precision(p);
  Tensor& w = conv.params()[0]->value;
  Tensor& b = conv.params()[1]->value;
  const ConvParams cp{1, 1, 1, 1};
  const Tensor x = random_tensor({N, C, H, W}, rng, DType::f32, fmt);
  const Tensor dy = random_tensor({N, O, H, W}, rng, DType::f32, fmt, -0.5, 0.5);
  Tensor y = Tensor::empty({N, O, H, W}, DType::f32, Device::cpu(), fmt);
  Tensor dx = Tensor::empty({N, C, H, W}, DType::f32, Device::cpu(), fmt);
  LayerContext ctx{*be, true, 0};
  conv.forward(ctx, {&x}, y);
  conv.backward(ctx, {&x}, y, dy, {&dx});

  auto fwd = [&](const Tensor& xx, const Tensor& ww, const Tensor* bb) {
    Tensor out = Tensor::empty({N, O, H, W}, DType::f64);
    ref.conv2d_forward(cp, xx, ww, bb, out, PostOp::none);
    return out;
  };
  const Tensor b64 = f64_of(b), babs = f64_of(b, DType::f32, true);
  verify({"conv dst", &y, fwd(f64_of(x), f64_of(w), &b64),
          fwd(f64_of(x, DType::f32, true), f64_of(w, DType::f32, true), &babs), fwd(f64_of(x, p), f64_of(w, p), &b64),
          C * Kk * Kk + 1},
         p);
  auto bwd_data = [&](const Tensor& d, const Tensor& ww) {
    Tensor out = Tensor::empty({N, C, H, W}, DType::f64);
    ref.conv2d_backward_data(cp, d, ww, out);
    return out;
  };
  verify({"conv diff_src", &dx, bwd_data(f64_of(dy), f64_of(w)),
          bwd_data(f64_of(dy, DType::f32, true), f64_of(w, DType::f32, true)), bwd_data(f64_of(dy, p), f64_of(w, p)),
          O * Kk * Kk},
         p);
  auto bwd_w = [&](const Tensor& xx, const Tensor& d) {
    Tensor out = Tensor::empty({O, C, Kk, Kk}, DType::f64);
    ref.conv2d_backward_weights(cp, xx, d, out, nullptr);
    return out;
  };
  verify(
      {"conv diff_weights", &conv.params()[0]->grad, bwd_w(f64_of(x), f64_of(dy)),
       bwd_w(f64_of(x, DType::f32, true), f64_of(dy, DType::f32, true)), bwd_w(f64_of(x, p), f64_of(dy, p)), N * H * W},
      p);
}

TEST_P(MixedPrecisionLayers, MasterWeightsStayF32AndUntouched) {
  Linear lin(31, 7);
  lin.create_params(*be, DType::f32, rng);
  lin.set_compute_precision(p);
  Tensor& w = lin.params()[0]->value;
  const Tensor before = w.contiguous_copy();
  const Tensor x = random_tensor({3, 31}, rng);
  Tensor y = Tensor::empty({3, 7}, DType::f32);
  LayerContext ctx{*be, true, 0};
  lin.forward(ctx, {&x}, y);
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_EQ(lin.params()[0]->grad.dtype(), DType::f32);
  for (int64_t i = 0; i < w.numel(); ++i)
    ASSERT_EQ(w.at_flat(i), before.at_flat(i)) << "the master weight was rounded in place";
}

INSTANTIATE_TEST_SUITE_P(PrecisionsAndBackends, MixedPrecisionLayers,
                         ::testing::Combine(::testing::Values(DType::bf16, DType::f16), ::testing::Values(0, 1)),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) == 0 ? "_reference" : "_cpu");
                         });

TEST(MixedPrecisionLayers, F32IsUnchanged) {
  // At f32 the layer must compute exactly what the plain op computes.
  DnnlBackend be;
  Rng rng(3);
  Linear lin(40, 9);
  lin.create_params(be, DType::f32, rng);
  lin.set_compute_precision(DType::f32);
  const Tensor x = random_tensor({5, 40}, rng);
  Tensor y = Tensor::empty({5, 9}, DType::f32), y0 = Tensor::empty({5, 9}, DType::f32);
  LayerContext ctx{be, true, 0};
  lin.forward(ctx, {&x}, y);
  be.linear_forward(x, lin.params()[0]->value, &lin.params()[1]->value, y0, PostOp::none);
  for (int64_t i = 0; i < y.numel(); ++i)
    ASSERT_EQ(y.at_flat(i), y0.at_flat(i));
  EXPECT_THROW(lin.set_compute_precision(DType::s8), Error);
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

/// Weight gradient of a bf16 Linear after forward(input, step 7) [, an interleaved forward of other
/// data] and backward(input, dy, step'), against a fresh identical layer that runs forward +
/// backward alone.
TEST(MixedPrecisionInputReuse, BackwardReusesTheForwardCopyOnlyWhenItIsStillTheSameInput) {
  DnnlBackend be;
  Rng rng(17);
  const Tensor x = random_tensor({8, 24}, rng), other = random_tensor({8, 24}, rng);
  const Tensor dy = random_tensor({8, 6}, rng);
  auto grad_of = [&](const std::function<void(Linear&, Tensor&)>& between, uint64_t backward_step,
                     const Tensor& input) {
    Linear lin(24, 6);
    Rng init(3);
    lin.create_params(be, DType::f32, init);
    lin.set_compute_precision(DType::bf16);
    Tensor y = Tensor::empty({8, 6}, DType::f32), dx = Tensor::empty({8, 24}, DType::f32);
    LayerContext train{be, true, 7};
    lin.forward(train, {&input}, y);
    between(lin, y);
    LayerContext back{be, true, backward_step};
    lin.backward(back, {&input}, y, dy, {&dx});
    return lin.params()[0]->grad.contiguous_copy();
  };
  const auto nothing = [](Linear&, Tensor&) {};
  const Tensor alone = grad_of(nothing, 7, x);
  // An evaluation forward of other data in between overwrites the layer's bf16 copy of its input.
  const Tensor after_eval = grad_of(
      [&](Linear& l, Tensor& y) {
        LayerContext eval{be, false, 0};
        l.forward(eval, {&other}, y);
      },
      7, x);
  // A training forward of other data at another step, likewise.
  const Tensor after_other_step = grad_of(
      [&](Linear& l, Tensor& y) {
        LayerContext t{be, true, 8};
        l.forward(t, {&other}, y);
      },
      7, x);
  // The same data and step but a backward at another step: converted again, same numbers.
  const Tensor other_backward_step = grad_of(nothing, 9, x);
  EXPECT_TRUE(test::all_close(after_eval, alone, 0, 0));
  EXPECT_TRUE(test::all_close(after_other_step, alone, 0, 0));
  EXPECT_TRUE(test::all_close(other_backward_step, alone, 0, 0));
  // A cache that ignored the interleaved evaluation would compute the gradient from `other`: make
  // sure that gradient really differs, so the checks above can fail.
  EXPECT_FALSE(test::all_close(grad_of(nothing, 7, other), alone, 0, 0));
}

}  // namespace
}  // namespace lathe
