// Int8Model (the INT8 executor of a trained sequential model) against an independent simulation of
// the same quantization written here in double precision from the saved tensors (s8 weights,
// scales, zero points), against the f32 model, and its plan, file and refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/int8_pool.h"
#include "engine/compress/quant/calibration_set.h"
#include "engine/data/loader.h"
#include "engine/nn/add.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/model_io.h"
#include "engine/nn/relu.h"
#include "engine/nn/safetensors.h"
#include "tests/quant/int8_test_models.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::calibrate_minmax;
using test::images_of;
using test::random_images;
using test::random_tensor;
using test::small_cnn;

std::map<std::string, Tensor> by_name(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::map<std::string, Tensor> m;
  for (const auto& [k, t] : v)
    m[k] = t;
  return m;
}

// ---- the independent simulation, in double, from the saved tensors ----
struct Sim {
  std::map<std::string, Tensor> t;
  double f(const std::string& k) const { return t.at(k).at_flat(0); }
  static double requant(double y, double s, double z, double qmin, double qmax) {
    return std::clamp(std::nearbyint(y / s) + z, qmin, qmax);
  }
};

/// One image [H, W] (normalised values) through the small cnn: integer values kept in doubles.
std::vector<double> simulate(const Sim& s, const std::vector<double>& img, int64_t side) {
  // quantize input with layer 0's input parameters (u8 asymmetric)
  const double sx0 = s.f("0.input_scale"), zx0 = s.f("0.input_zero_point");
  std::vector<double> x(img.size());
  for (size_t i = 0; i < img.size(); ++i)
    x[i] = Sim::requant(img[i], sx0, zx0, 0, 255);
  int64_t C = 1, H = side, W = side;
  auto conv_relu_pool = [&](const std::string& n, int64_t O) {
    const Tensor& w = s.t.at(n + ".weight");
    const Tensor& ws = s.t.at(n + ".weight_scale");
    const Tensor& b = s.t.at(n + ".bias");
    const double sx = s.f(n + ".input_scale"), zx = s.f(n + ".input_zero_point");
    const double sy = s.f(n + ".output_scale"), zy = s.f(n + ".output_zero_point");
    std::vector<double> y(O * H * W);  // [O][H][W]
    for (int64_t o = 0; o < O; ++o)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t q = 0; q < W; ++q) {
          double acc = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t kh = 0; kh < 3; ++kh)
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t ih = h - 1 + kh, iw = q - 1 + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                  continue;
                acc += (x[(c * H + ih) * W + iw] - zx) * w.get({o, c, kh, kw});
              }
          const double real = std::max(0.0, acc * sx * ws.at_flat(o) + b.at_flat(o));
          y[(o * H + h) * W + q] = Sim::requant(real, sy, zy, 0, 255);
        }
    std::vector<double> p(O * (H / 2) * (W / 2));
    for (int64_t o = 0; o < O; ++o)
      for (int64_t h = 0; h < H / 2; ++h)
        for (int64_t q = 0; q < W / 2; ++q)
          p[(o * (H / 2) + h) * (W / 2) + q] =
              std::max({y[(o * H + 2 * h) * W + 2 * q], y[(o * H + 2 * h) * W + 2 * q + 1],
                        y[(o * H + 2 * h + 1) * W + 2 * q], y[(o * H + 2 * h + 1) * W + 2 * q + 1]});
    x = p;
    C = O;
    H /= 2;
    W /= 2;
  };
  conv_relu_pool("0", 6);
  conv_relu_pool("3", 8);
  // flatten in (H, W, C) order: the saved linear weights are permuted to match
  std::vector<double> flat(C * H * W);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t q = 0; q < W; ++q)
        flat[(h * W + q) * C + c] = x[(c * H + h) * W + q];
  auto linear = [&](const std::string& n, const std::vector<double>& in, bool last) {
    const Tensor& w = s.t.at(n + ".weight");
    const Tensor& ws = s.t.at(n + ".weight_scale");
    const Tensor& b = s.t.at(n + ".bias");
    const double sx = s.f(n + ".input_scale"), zx = s.f(n + ".input_zero_point");
    std::vector<double> out(w.dim(0));
    for (int64_t o = 0; o < w.dim(0); ++o) {
      double acc = 0;
      for (int64_t k = 0; k < w.dim(1); ++k)
        acc += (in[k] - zx) * w.get({o, k});
      const double real = acc * sx * ws.at_flat(o) + b.at_flat(o);
      out[o] = last
                   ? real
                   : Sim::requant(std::max(real, 0.0), s.f(n + ".output_scale"), s.f(n + ".output_zero_point"), 0, 255);
    }
    return out;
  };
  return linear("9", linear("7", flat, false), true);
}

TEST(Int8Model, MatchesDoubleSimulationOfTheSameQuantization) {
  DnnlBackend be;
  auto m = small_cnn(be, 5);
  const Dataset calib = random_images(64, 12, 1), test = random_images(32, 12, 2);
  Int8Model q(*m, be, calibrate_minmax(*m, be, calib));
  EXPECT_EQ(q.int8_layers(), 4);
  EXPECT_EQ(q.f32_layers(), 0);
  const Tensor x = images_of(test);
  const Tensor y = q.forward(x);
  ASSERT_EQ(y.shape(), (Shape{32, 10}));
  Sim s{by_name(q.state_tensors())};
  EXPECT_EQ(s.t.at("0.weight").dtype(), DType::s8);
  double max_diff = 0, max_logit = 0;
  for (int64_t n = 0; n < 32; ++n) {
    std::vector<double> img(144);
    for (int64_t i = 0; i < 144; ++i)
      img[i] = x.get({n, 0, i / 12, i % 12});
    const std::vector<double> want = simulate(s, img, 12);
    for (int64_t k = 0; k < 10; ++k) {
      max_diff = std::max(max_diff, std::fabs(y.get({n, k}) - want[k]));
      max_logit = std::max(max_logit, std::fabs(want[k]));
    }
  }
  // Float vs double requantization can flip a rounding tie now and then (1 LSB of one
  // activation); anything structural (wrong order, scale, zero point) is far larger.
  EXPECT_LT(max_diff, 0.02 * max_logit) << q.plan();
}

TEST(Int8Model, CloseToTheF32ModelAndDropoutIsIdentity) {
  DnnlBackend be;
  auto m = small_cnn(be, 7, /*dropout=*/true);
  const Dataset calib = random_images(128, 12, 3), test = random_images(64, 12, 4);
  Int8Model q(*m, be, calibrate_minmax(*m, be, calib));
  const Tensor x = images_of(test);
  LayerContext ctx{be, false, 0};
  const Tensor f = m->forward(ctx, x);
  const Tensor y = q.forward(x);
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < f.numel(); ++i) {
    err2 += (y.at_flat(i) - f.at_flat(i)) * (y.at_flat(i) - f.at_flat(i));
    ref2 += f.at_flat(i) * f.at_flat(i);
  }
  EXPECT_LT(std::sqrt(err2 / ref2), 0.05) << q.plan();
  EXPECT_GT(std::sqrt(err2 / ref2), 0.0) << "an INT8 model identical to f32 is suspicious";
}

TEST(Int8Model, KeepF32LayersRunInF32AndStayClose) {
  DnnlBackend be;
  auto m = small_cnn(be, 9);
  const Dataset calib = random_images(64, 12, 5), test = random_images(32, 12, 6);
  const ActivationParams acts = calibrate_minmax(*m, be, calib);
  Int8ModelOptions all_f32;
  all_f32.keep_f32 = {"0", "3", "7", "9"};
  Int8Model f(*m, be, acts, all_f32);
  EXPECT_EQ(f.int8_layers(), 0);
  EXPECT_EQ(f.f32_layers(), 4);
  const Tensor x = images_of(test);
  LayerContext ctx{be, false, 0};
  const Tensor ref = m->forward(ctx, x);
  const Tensor yf = f.forward(x);
  for (int64_t i = 0; i < ref.numel(); ++i)
    ASSERT_NEAR(yf.at_flat(i), ref.at_flat(i), 1e-4 * (1 + std::fabs(ref.at_flat(i)))) << f.plan();
  Int8ModelOptions mixed;
  mixed.keep_f32 = {"7"};  // the flatten before it must then give (C, H, W) order in f32
  Int8Model mq(*m, be, acts, mixed);
  EXPECT_EQ(mq.int8_layers(), 3);
  EXPECT_NE(mq.plan().find("f32 linear"), std::string::npos) << mq.plan();
  const Tensor ym = mq.forward(x);
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    err2 += (ym.at_flat(i) - ref.at_flat(i)) * (ym.at_flat(i) - ref.at_flat(i));
    ref2 += ref.at_flat(i) * ref.at_flat(i);
  }
  EXPECT_LT(std::sqrt(err2 / ref2), 0.05) << mq.plan();
  EXPECT_THROW(Int8Model(*m, be, acts, Int8ModelOptions{true, Int8WeightRange::auto_for_cpu, {"2"}}), ConfigError);
}

TEST(Int8Model, FlatMlpAndPerTensorWeights) {
  DnnlBackend be;
  Model m(Shape{64});
  m.add("0", std::make_unique<Linear>(64, 32));
  m.add("1", std::make_unique<ReLU>());
  m.add("2", std::make_unique<Linear>(32, 10));
  Rng rng(3);
  m.create_params(be, DType::f32, rng);
  const Dataset calib = random_images(64, 8, 7), test = random_images(16, 8, 8);
  const ActivationParams acts = calibrate_minmax(m, be, calib);
  const Tensor x = images_of(test);
  LayerContext ctx{be, false, 0};
  const Tensor ref = m.forward(ctx, x.view({16, 64}));
  for (bool per_channel : {true, false}) {
    Int8ModelOptions o;
    o.per_channel_weights = per_channel;
    Int8Model q(m, be, acts, o);
    const Tensor y = q.forward(x);  // [16, 1, 8, 8] is viewed as [16, 64]
    double err2 = 0, ref2 = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      err2 += (y.at_flat(i) - ref.at_flat(i)) * (y.at_flat(i) - ref.at_flat(i));
      ref2 += ref.at_flat(i) * ref.at_flat(i);
    }
    EXPECT_LT(std::sqrt(err2 / ref2), 0.05) << per_channel;
    const auto t = by_name(q.state_tensors());
    const Tensor& ws = t.at("0.weight_scale");
    bool all_equal = true;
    for (int64_t i = 1; i < ws.numel(); ++i)
      all_equal &= ws.at_flat(i) == ws.at_flat(0);
    EXPECT_EQ(all_equal, !per_channel);
  }
}

TEST(Int8Model, SavedFileHoldsS8WeightsAndIsAQuarterOfF32) {
  DnnlBackend be;
  Model m(Shape{1, 8, 8});
  m.add("0", std::make_unique<Conv2d>(1, 16, 3, 1, 1));
  m.add("1", std::make_unique<ReLU>());
  m.add("2", std::make_unique<Flatten>());
  m.add("3", std::make_unique<Linear>(16 * 64, 128));
  m.add("4", std::make_unique<ReLU>());
  m.add("5", std::make_unique<Linear>(128, 10));
  Rng rng(4);
  m.create_params(be, DType::f32, rng);
  Int8Model q(m, be, calibrate_minmax(m, be, random_images(32, 8, 9)));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lathe_int8_model_test";
  std::filesystem::create_directories(dir);
  const int64_t f32_bytes = save_model(m, be, (dir / "f32.safetensors").string());
  const int64_t bytes = q.save((dir / "int8.safetensors").string());
  EXPECT_EQ(bytes, static_cast<int64_t>(std::filesystem::file_size(dir / "int8.safetensors")));
  EXPECT_EQ(q.serialized_bytes(), bytes);
  EXPECT_LT(static_cast<double>(bytes), 0.26 * static_cast<double>(f32_bytes)) << bytes << " vs " << f32_bytes;
  const SafetensorsFile f = load_safetensors((dir / "int8.safetensors").string());
  EXPECT_EQ(f.metadata.at("format"), "lathe-int8");
  const auto t = by_name(f.tensors);
  EXPECT_EQ(t.at("3.weight").dtype(), DType::s8);
  EXPECT_EQ(t.at("3.weight").shape(), (Shape{128, 1024}));
  EXPECT_EQ(t.at("0.weight_scale").dtype(), DType::f32);
  // The file holds exactly what the executor runs.
  const auto live = by_name(q.state_tensors());
  for (const auto& [name, tensor] : live) {
    ASSERT_TRUE(t.count(name)) << name;
    for (int64_t i = 0; i < tensor.numel(); ++i)
      ASSERT_EQ(t.at(name).at_flat(i), tensor.at_flat(i)) << name;
  }
  std::filesystem::remove_all(dir);
}

TEST(Int8Model, ResidualGraphsArePlannedStaticallyAndRefusedDynamically) {
  DnnlBackend be;
  Model res(Shape{16});
  res.add("0", std::make_unique<Linear>(16, 16));
  res.add("1", std::make_unique<ReLU>());
  res.add("2", std::make_unique<Add>(), {"0", "1"});
  res.add("3", std::make_unique<Linear>(16, 4));
  Rng rng(1);
  res.create_params(be, DType::f32, rng);
  const std::vector<std::string> taps = int8_activation_taps(res);  // graphs: int8_graph_test.cpp
  EXPECT_EQ(taps, (std::vector<std::string>{"input", "0", "1", "2"}));
  Int8ModelOptions dynamic;
  dynamic.dynamic_activations = true;
  EXPECT_THROW(Int8Model(res, be, {}, dynamic), ConfigError);
  Model ok(Shape{16});
  ok.add("0", std::make_unique<Linear>(16, 4));
  ok.create_params(be, DType::f32, rng);
  EXPECT_THROW(Int8Model(ok, be, {}), Error);  // no parameters for the input tap
}

TEST(Int8Pool, MaxPoolOnIntegersEqualsPoolOfDequantized) {
  Rng rng(12);
  const Tensor x = random_tensor({2, 5, 7, 9}, rng, DType::f32, MemoryFormat::channels_last, -1, 2);
  for (const QuantParams& p : {make_quant_params(-1, 2, 8, false, false), make_quant_params(-2, 2, 8, true, true)}) {
    for (const PoolParams& pp : {PoolParams{2, 2, 2, 2, 0, 0}, PoolParams{3, 3, 2, 2, 1, 1}}) {
      const Tensor q = quantize(x, p);
      const Tensor y = int8_maxpool2d(q, pp);
      const Tensor dq = dequantize(q, p);
      const int64_t OH = y.dim(2), OW = y.dim(3);
      for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 5; ++c)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              double want = -1e30;
              for (int64_t kh = 0; kh < pp.kernel_h; ++kh)
                for (int64_t kw = 0; kw < pp.kernel_w; ++kw) {
                  const int64_t ih = oh * pp.stride_h - pp.pad_h + kh, iw = ow * pp.stride_w - pp.pad_w + kw;
                  if (ih >= 0 && ih < 7 && iw >= 0 && iw < 9)
                    want = std::max(want, dq.get({n, c, ih, iw}));
                }
              ASSERT_EQ(dequantize_value(static_cast<int32_t>(y.get({n, c, oh, ow})), p.scale[0], p.zero_point[0]),
                        static_cast<float>(want));
            }
    }
  }
}

}  // namespace
}  // namespace lathe
