// bf16 activations under mixed-precision training (Model::set_low_precision_activations): the
// oneDNN ops that read and write bf16 activations against the same ops on the f32 widening of the
// same numbers, the Model's storage plan (which nodes go bf16, which must stay f32), and a whole cnn
// training step against f32 storage of the same bf16-rounded numbers. Skips, saying why, on CPUs
// without bf16 instructions (there bf16 is emulated and activations stay f32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "engine/backend/cpu/bf16_conv_c1.h"
#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/quant/calibration_set.h"
#include "engine/nn/add.h"
#include "engine/nn/linear.h"
#include "engine/nn/relu.h"
#include "engine/nn/zoo.h"
#include "engine/exec/batch_loop.h"
#include "tests/support/native_bf16.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::all_close;
constexpr auto kCl = MemoryFormat::channels_last;

/// An f32 copy of `t` (same shape and layout).
Tensor widened(const Tensor& t) {
  Tensor w = Tensor::empty(t.shape(), DType::f32, Device::cpu(), t.format());
  for (int64_t i = 0; i < t.numel(); ++i)
    w.set_flat(i, t.at_flat(i));
  return w;
}

/// `t` rounded to bf16 (same shape and layout): what a bf16 op writes for these f32 results.
Tensor rounded_bf16(const Tensor& t) {
  Tensor r = Tensor::empty(t.shape(), DType::bf16, Device::cpu(), t.format());
  for (int64_t i = 0; i < t.numel(); ++i)
    r.set_flat(i, t.at_flat(i));
  return r;
}

/// bf16 results from f32 sums accumulated in another order may round one bf16 step (2^-8
/// relative) apart; anything wrong in layout or arithmetic is far larger.
constexpr double kOneBf16Step = 0x1p-7;

class Bf16Activations : public ::testing::Test {
 protected:
  DnnlBackend cpu;
  Rng rng{5};
  void SetUp() override {
    if (const std::string why = test::no_native_bf16_reason(cpu); !why.empty())
      GTEST_SKIP() << why;
  }
};

TEST_F(Bf16Activations, BackendSaysWhichOpsRunInBf16) {
  for (Op op : {Op::linear, Op::conv2d, Op::relu, Op::maxpool2d, Op::reorder})
    EXPECT_TRUE(cpu.supports(op, DType::bf16)) << op_name(op);
  for (Op op : {Op::add, Op::batchnorm2d, Op::dropout})
    EXPECT_FALSE(cpu.supports(op, DType::bf16)) << op_name(op);
}

TEST_F(Bf16Activations, ReluAndMaxPoolAreExactOnBf16) {
  // Distinct values (k / 64 for k = -144..143, exact in bf16), so the pooling argmax has no ties.
  const Shape s{2, 4, 6, 6};
  std::vector<int> k(shape_numel(s));
  std::iota(k.begin(), k.end(), -144);
  std::shuffle(k.begin(), k.end(), std::mt19937(3));
  Tensor x = Tensor::empty(s, DType::bf16, Device::cpu(), kCl);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set_flat(i, k[i] / 64.0);
  const Tensor x32 = widened(x);

  Tensor y = Tensor::empty(s, DType::bf16, Device::cpu(), kCl), y32 = widened(y);
  cpu.relu_forward(x, y);
  cpu.relu_forward(x32, y32);
  EXPECT_TRUE(all_close(widened(y), y32, 0, 0));
  const Tensor dy = test::random_tensor(s, rng, DType::bf16, kCl);
  Tensor dx = Tensor::empty(s, DType::bf16, Device::cpu(), kCl), dx32 = widened(dx);
  cpu.relu_backward(y, dy, dx);
  cpu.relu_backward(y32, widened(dy), dx32);
  EXPECT_TRUE(all_close(widened(dx), dx32, 0, 0));

  const PoolParams p{2, 2, 2, 2, 0, 0};
  const Shape ps{2, 4, 3, 3};
  Tensor py = Tensor::empty(ps, DType::bf16, Device::cpu(), kCl), py32 = widened(py), ws, ws32;
  cpu.maxpool2d_forward(p, x, py, ws);
  cpu.maxpool2d_forward(p, x32, py32, ws32);
  EXPECT_TRUE(all_close(widened(py), py32, 0, 0));
  const Tensor pdy = test::random_tensor(ps, rng, DType::bf16, kCl);
  Tensor pdx = Tensor::empty(s, DType::bf16, Device::cpu(), kCl), pdx32 = widened(pdx);
  cpu.maxpool2d_backward(p, pdy, ws, pdx);
  cpu.maxpool2d_backward(p, widened(pdy), ws32, pdx32);
  EXPECT_TRUE(all_close(widened(pdx), pdx32, 0, 0));
  double routed = 0;  // every gradient value lands somewhere: the test sees a real scatter
  for (int64_t i = 0; i < pdx.numel(); ++i)
    routed += std::fabs(pdx.at_flat(i));
  EXPECT_GT(routed, 0.1);
}

TEST_F(Bf16Activations, ConvAndLinearWriteTheirF32ResultsRoundedToBf16) {
  const ConvParams cp{1, 1, 1, 1};
  const Tensor x = test::random_tensor({3, 8, 7, 7}, rng, DType::bf16, kCl);
  const Tensor w = test::random_tensor({16, 8, 3, 3}, rng, DType::bf16);
  const Tensor b = test::random_tensor({16}, rng);
  Tensor y = Tensor::empty({3, 16, 7, 7}, DType::bf16, Device::cpu(), kCl), y32 = widened(y);
  cpu.conv2d_forward(cp, x, w, &b, y, PostOp::relu);
  cpu.conv2d_forward(cp, x, w, &b, y32, PostOp::relu);
  EXPECT_TRUE(all_close(widened(y), widened(rounded_bf16(y32)), kOneBf16Step, 1e-6));
  const Tensor dy = test::random_tensor({3, 16, 7, 7}, rng, DType::bf16, kCl);
  Tensor dx = Tensor::empty({3, 8, 7, 7}, DType::bf16, Device::cpu(), kCl), dx32 = widened(dx);
  cpu.conv2d_backward_data(cp, dy, w, dx);
  cpu.conv2d_backward_data(cp, dy, w, dx32);
  EXPECT_TRUE(all_close(widened(dx), widened(rounded_bf16(dx32)), kOneBf16Step, 1e-6));

  const Tensor a = test::random_tensor({9, 40}, rng, DType::bf16), lw = test::random_tensor({12, 40}, rng, DType::bf16);
  const Tensor lb = test::random_tensor({12}, rng);
  Tensor ly = Tensor::empty({9, 12}, DType::bf16), ly32 = Tensor::empty({9, 12}, DType::f32);
  cpu.linear_forward(a, lw, &lb, ly, PostOp::none);
  cpu.linear_forward(a, lw, &lb, ly32, PostOp::none);
  EXPECT_TRUE(all_close(widened(ly), widened(rounded_bf16(ly32)), kOneBf16Step, 1e-6));
  const Tensor ldy = test::random_tensor({9, 12}, rng, DType::bf16);
  Tensor ldx = Tensor::empty({9, 40}, DType::bf16), ldx32 = Tensor::empty({9, 40}, DType::f32);
  cpu.linear_backward_data(ldy, lw, ldx);
  cpu.linear_backward_data(ldy, lw, ldx32);
  EXPECT_TRUE(all_close(widened(ldx), widened(rounded_bf16(ldx32)), kOneBf16Step, 1e-6));
}

// The first conv of a grey-image net (one input channel) runs in Lathe's own kernel (bf16_conv_c1):
// its forward and weight gradient against the reference backend on the same bf16 operands (widened
// exactly, f32 sums), through the backend and called directly, over strides, paddings, odd sizes,
// odd batch counts (threads split images) and more than one 16-channel block.
TEST_F(Bf16Activations, FirstConvWithOneInputChannelMatchesTheReference) {
  ReferenceBackend ref;
  struct Case {
    int64_t n, h, w, o, stride, pad;
  };
  for (const Case& c : {Case{5, 28, 28, 32, 1, 1}, Case{3, 9, 7, 16, 2, 0}, Case{2, 6, 11, 48, 1, 2},
                        Case{1, 5, 5, 16, 3, 1}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " " << c.h << "x" << c.w << " o=" << c.o << " s" << c.stride
                                    << " p" << c.pad);
    const ConvParams p{c.stride, c.stride, c.pad, c.pad};
    const int64_t oh = conv_out_size(c.h, 3, c.stride, c.pad), ow = conv_out_size(c.w, 3, c.stride, c.pad);
    const Tensor x = test::random_tensor({c.n, 1, c.h, c.w}, rng, DType::bf16, kCl);
    const Tensor w = test::random_tensor({c.o, 1, 3, 3}, rng, DType::bf16);
    const Tensor b = test::random_tensor({c.o}, rng);
    Tensor y = Tensor::empty({c.n, c.o, oh, ow}, DType::bf16, Device::cpu(), kCl);
    ASSERT_TRUE(cpu::bf16_conv_c1_applies(p, x, w, y)) << "this CPU has bf16 instructions: the kernel must take it";
    for (PostOp post : {PostOp::none, PostOp::relu}) {
      Tensor want = Tensor::empty(y.shape(), DType::f32);
      ref.conv2d_forward(p, x, w, &b, want, post);
      cpu.conv2d_forward(p, x, w, &b, y, post);
      EXPECT_TRUE(all_close(widened(y), widened(rounded_bf16(want)), kOneBf16Step, 1e-6)) << "bf16 forward";
      Tensor y32 = Tensor::empty(y.shape(), DType::f32, Device::cpu(), kCl);
      cpu::bf16_conv_c1_forward(p, x, w, &b, y32, post);
      EXPECT_TRUE(all_close(y32, want, 1e-5, 1e-6)) << "f32 forward";
    }
    Tensor y0 = Tensor::empty(y.shape(), DType::f32), ynb = y;
    ref.conv2d_forward(p, x, w, nullptr, y0, PostOp::none);
    cpu.conv2d_forward(p, x, w, nullptr, ynb, PostOp::none);
    EXPECT_TRUE(all_close(widened(ynb), widened(rounded_bf16(y0)), kOneBf16Step, 1e-6)) << "forward without bias";

    const Tensor dy = test::random_tensor(y.shape(), rng, DType::bf16, kCl);
    Tensor dw0 = Tensor::empty(w.shape(), DType::f32), db0 = Tensor::empty({c.o}, DType::f32);
    ref.conv2d_backward_weights(p, x, dy, dw0, &db0);
    const double atol = 1e-5 * std::sqrt(static_cast<double>(c.n * oh * ow));
    Tensor dw = Tensor::empty(w.shape(), DType::f32), db = Tensor::empty({c.o}, DType::f32);
    cpu.conv2d_backward_weights(p, x, dy, dw, &db);
    EXPECT_TRUE(all_close(dw, dw0, 1e-4, atol)) << "weight gradient";
    EXPECT_TRUE(all_close(db, db0, 1e-4, atol)) << "bias gradient";
    Tensor dw2 = Tensor::empty(w.shape(), DType::f32);
    cpu::bf16_conv_c1_backward_weights(p, x, dy, dw2, nullptr);
    EXPECT_TRUE(all_close(dw2, dw0, 1e-4, atol)) << "weight gradient without bias";
  }
  // Cases the kernel leaves to oneDNN: f32 operands, more than one input channel, channel counts
  // off the 16-lane block.
  const ConvParams p{1, 1, 1, 1};
  const Tensor x32 = test::random_tensor({2, 1, 8, 8}, rng, DType::f32, kCl);
  const Tensor w16 = test::random_tensor({16, 1, 3, 3}, rng, DType::bf16);
  const Tensor out = Tensor::empty({2, 16, 8, 8}, DType::bf16, Device::cpu(), kCl);
  EXPECT_FALSE(cpu::bf16_conv_c1_applies(p, x32, w16, out));
  const Tensor x2 = test::random_tensor({2, 2, 8, 8}, rng, DType::bf16, kCl);
  EXPECT_FALSE(cpu::bf16_conv_c1_applies(p, x2, test::random_tensor({16, 2, 3, 3}, rng, DType::bf16), out));
  const Tensor x1 = test::random_tensor({2, 1, 8, 8}, rng, DType::bf16, kCl);
  EXPECT_FALSE(cpu::bf16_conv_c1_applies(p, x1, test::random_tensor({12, 1, 3, 3}, rng, DType::bf16),
                                         Tensor::empty({2, 12, 8, 8}, DType::bf16, Device::cpu(), kCl)));
}

/// One cnn training step at bf16 compute precision; returns the logits and every gradient.
struct StepResult {
  Tensor logits;
  std::vector<Tensor> grads;
  std::vector<DType> stored;  // each node's activation dtype
};

StepResult cnn_step(Backend& be, bool low_precision_activations, const Tensor& x, const Tensor& labels) {
  auto m = build_zoo_model("cnn");
  Rng init(7);
  m->create_params(be, DType::f32, init);
  m->set_compute_precision(DType::bf16);
  m->set_low_precision_activations(low_precision_activations);
  LayerContext ctx{be, true, 0};
  Tensor diff;
  forward_backward(*m, ctx, x, labels, 1.0 / x.dim(0), diff);
  StepResult r{m->output().contiguous_copy(), {}, {}};
  for (auto& p : m->named_params())
    r.grads.push_back(p.param->grad.contiguous_copy());
  for (size_t i = 0; i < m->size(); ++i)
    r.stored.push_back(m->activation_dtype(i));
  return r;
}

/// ||a - b|| / ||b|| over all elements.
double relative_l2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.at_flat(i) - b.at_flat(i);
    num += d * d;
    den += b.at_flat(i) * b.at_flat(i);
  }
  return std::sqrt(num / den);
}

TEST_F(Bf16Activations, CnnStepStoresBf16AndMatchesF32StorageOfTheSameNumbers) {
  const int64_t n = 16;
  const Tensor x = test::random_tensor({n, 1, 28, 28}, rng, DType::f32, MemoryFormat::contiguous, 0, 1);
  Tensor labels = Tensor::empty({n}, DType::s32);
  for (int64_t i = 0; i < n; ++i)
    labels.set({i}, i % 10);
  const StepResult low = cnn_step(cpu, true, x, labels), f32 = cnn_step(cpu, false, x, labels);
  // conv, relu (fused), pool, conv, relu, pool, flatten, linear, relu in bf16; the logits in f32.
  const std::vector<DType> want = {DType::bf16, DType::bf16, DType::bf16, DType::bf16, DType::bf16,
                                   DType::bf16, DType::bf16, DType::bf16, DType::bf16, DType::f32};
  EXPECT_EQ(low.stored, want);
  EXPECT_EQ(f32.stored, std::vector<DType>(10, DType::f32));
  // The same bf16 operands and roundings. On AVX512_BF16 (Zen 4) the two are bit for bit equal; the
  // bound leaves room for kernels that sum in another order elsewhere (a bf16 step here and there),
  // far below what a wrong layout or a lost gradient gives (errors of order 1).
  EXPECT_LE(relative_l2(low.logits, f32.logits), 1e-3);
  ASSERT_EQ(low.grads.size(), f32.grads.size());
  for (size_t k = 0; k < low.grads.size(); ++k)
    EXPECT_LE(relative_l2(low.grads[k], f32.grads[k]), 1e-3) << "gradient " << k;
}

TEST_F(Bf16Activations, PlanKeepsBranchesSumsAndTheOutputInF32) {
  // a -> b=relu(a) -> c -> d=relu(c) -> e -> f = e + b: b feeds two layers (its gradient is a sum)
  // and a cannot write bf16 into b's f32; c and d form a bf16 chain; e feeds add (f32 only).
  Model m({8});
  m.add("a", std::make_unique<Linear>(8, 8));
  m.add("b", std::make_unique<ReLU>());
  m.add("c", std::make_unique<Linear>(8, 8));
  m.add("d", std::make_unique<ReLU>());
  m.add("e", std::make_unique<Linear>(8, 8));
  m.add("f", std::make_unique<Add>(), {"e", "b"});
  Rng init(1);
  m.create_params(cpu, DType::f32, init);
  m.set_compute_precision(DType::bf16);
  const Tensor x = test::random_tensor({4, 8}, rng);
  LayerContext ctx{cpu, true, 0};
  m.forward(ctx, x);
  const std::vector<DType> want = {DType::f32, DType::f32, DType::bf16, DType::bf16, DType::f32, DType::f32};
  for (size_t i = 0; i < m.size(); ++i)
    EXPECT_EQ(m.activation_dtype(i), want[i]) << "node " << m.node_name(i);
  const Tensor dy = test::random_tensor({4, 8}, rng);
  m.backward(ctx, dy);  // the gradients flow through the bf16 chain into the f32 sum at b
  for (auto& p : m.named_params()) {
    double norm = 0;
    for (int64_t i = 0; i < p.param->grad.numel(); ++i)
      norm += std::fabs(p.param->grad.at_flat(i));
    EXPECT_GT(norm, 0) << p.name;
  }
  EXPECT_NO_THROW(m.activation("b"));
  EXPECT_THROW(m.activation("d"), ConfigError);  // stored in bf16: says how to read it in f32
  m.set_low_precision_activations(false);
  m.forward(ctx, x);
  for (size_t i = 0; i < m.size(); ++i)
    EXPECT_EQ(m.activation_dtype(i), DType::f32) << "node " << m.node_name(i);
  EXPECT_NO_THROW(m.activation("d"));
}

TEST_F(Bf16Activations, OnlyABackendThatWritesBf16ResultsGetsBf16Activations) {
  // Linear -> Linear: the first output is bf16 where the backend writes bf16 results (oneDNN
  // here), f32 where it computes bf16 natively but writes f32 only (as cuBLAS/cuDNN do today).
  struct F32ResultsOnly final : ReferenceBackend {
    bool supports(Op op, DType dt) const override {
      return ReferenceBackend::supports(op, dt) ||
             (dt == DType::bf16 && (op == Op::linear || op == Op::conv2d || op == Op::reorder));
    }
  } f32_results;
  for (Backend* be : std::initializer_list<Backend*>{&cpu, &f32_results}) {
    Model m({8});
    m.add("a", std::make_unique<Linear>(8, 16));
    m.add("b", std::make_unique<Linear>(16, 4));
    Rng init(1);
    m.create_params(*be, DType::f32, init);
    m.set_compute_precision(DType::bf16);
    LayerContext ctx{*be, true, 0};
    m.forward(ctx, test::random_tensor({4, 8}, rng));
    EXPECT_EQ(m.activation_dtype(0), be == &cpu ? DType::bf16 : DType::f32);
    EXPECT_EQ(m.activation_dtype(1), DType::f32);
    EXPECT_NO_THROW(m.backward(ctx, test::random_tensor({4, 4}, rng)));
  }
}

TEST_F(Bf16Activations, CalibrationReadsAbf16ModelInF32AndLeavesItsSetting) {
  auto m = build_zoo_model("cnn");
  Rng init(2);
  m->create_params(cpu, DType::f32, init);
  m->set_compute_precision(DType::bf16);
  Dataset data;
  data.rows = data.cols = 28;
  data.count = 32;
  data.num_classes = 10;
  data.images.resize(32 * 28 * 28);
  for (size_t i = 0; i < data.images.size(); ++i)
    data.images[i] = static_cast<uint8_t>((i * 37) % 251);
  data.labels.assign(32, 3);
  const ActivationStats stats = collect_activation_stats(*m, cpu, data, 16);
  EXPECT_EQ(stats.samples, 32);
  EXPECT_FALSE(stats.taps.empty());
  EXPECT_TRUE(m->low_precision_activations());
}

}  // namespace
}  // namespace lathe
