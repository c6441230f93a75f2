// A whole static-PTQ Int8Model on the cuda backend (its INT8 ops) against the CPU: the cnn (u8 conv +
// ReLU, integer max pooling, channels-last flatten feeding permuted Linear columns, dropout) and an
// mlp, per-channel and per-tensor weights. Two oracles, both on the CPU:
//   - the plan's integer arithmetic (each INT8 layer's forward_reference, the CPU's quantize, integer
//     pooling/ReLU, the (H, W, C) flatten): the GPU must give the same logits bit for bit;
//   - Int8Model::forward (oneDNN): the same logits bit for bit for every sample whose oneDNN result
//     equals the integer arithmetic. oneDNN requantizes in float in its own order and may flip a
//     rounding tie by 1 LSB now and then (tests/quant/int8_ops_test.cpp allows it); where it does,
//     the GPU follows the integer arithmetic, so those samples are only held to the oneDNN result
//     within the 2% of the largest logit that tests/quant/int8_model_test.cpp allows for one flip.
// Plus the integer max-pool/ReLU kernels alone, and the refusals (dynamic, keep_f32) and the oracle
// check that need no device. Label gpu: skipped with the reason without one.
// Compiled only when the CUDA backend is linked (a CPU-only build still globs this folder).
#ifdef LATHE_HAVE_CUDA
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/int8_pool.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/nn/zoo.h"
#include "kernels/int8_pool.cuh"
#include "tests/gpu/gpu_test_support.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

using gputest::CudaTest;
using Kind = Int8Model::Step::Kind;

Tensor channels_last_copy(const Tensor& t) {
  Tensor cl = Tensor::empty(t.shape(), t.dtype(), Device::cpu(), MemoryFormat::channels_last);
  t.copy_to(cl);
  return cl;
}

/// The plan of `q` in its integer arithmetic on the host (the first oracle of the header).
Tensor integer_plan(const Int8Model& q, const Tensor& images) {
  const int64_t N = images.dim(0);
  Shape want{N};
  want.insert(want.end(), q.model().input_shape().begin(), q.model().input_shape().end());
  Tensor x = images.shape() == want ? images : images.view(want);
  for (const auto& sp : q.steps()) {
    const Int8Model::Step& s = *sp;
    switch (s.kind) {
      case Kind::quantize:
        x = quantize(s.to_channels_last && x.ndim() == 4 ? channels_last_copy(x) : x, s.params);
        break;
      case Kind::int8_conv: {
        ReferenceBackend ref;
        const ConvParams p = s.kernel->conv_params();
        x = channels_last_copy(ref.make_int8_kernel(s.kernel->layer(), &p)->forward(x));
        break;
      }
      case Kind::int8_linear: {
        ReferenceBackend ref;
        x = ref.make_int8_kernel(s.kernel->layer())->forward(x);
        break;
      }
      case Kind::int8_maxpool:
        x = int8_maxpool2d(x, s.pool);
        break;
      case Kind::int8_relu:
        x = x.contiguous_copy();
        int8_relu_inplace(x, s.params.zero_point[0]);
        break;
      case Kind::flatten_q: {  // channels-last memory read as rows of H*W*C
        Tensor flat = Tensor::empty({N, x.numel() / N}, x.dtype());
        std::memcpy(flat.raw(), x.raw(), x.nbytes());
        x = flat;
        break;
      }
      default:
        ADD_FAILURE() << "integer_plan: step '" << s.text << "' is not an integer step";
        return {};
    }
  }
  return x;
}

bool same_row(const Tensor& a, const Tensor& b, int64_t n) {
  const int64_t k = a.dim(1);
  for (int64_t j = 0; j < k; ++j)
    if (a.get({n, j}) != b.get({n, j}))
      return false;
  return true;
}

class CudaInt8ModelTest : public CudaTest {
 protected:
  /// Runs `q` on the GPU and checks it against both oracles on `images` (host f32).
  void check_against_cpu(Int8Model& q, Model& m, const ActivationParams& acts, const Int8ModelOptions& o,
                         const Tensor& images) {
    const Tensor cpu = q.forward(images);
    const Tensor ints = integer_plan(q, images);
    Int8Model g(m, gpu(), acts, o);  // the same plan, its INT8 layers prepared on the cuda backend
    ASSERT_EQ(g.refusal(), "");
    const Tensor got = down(g.forward(up(images)));
    ASSERT_EQ(got.shape(), cpu.shape()) << q.plan();
    ASSERT_EQ(got.dtype(), DType::f32);
    EXPECT_EQ(test::mismatches(got, ints), 0)
        << "logits differing from the plan's integer arithmetic, of " << got.numel() << "\n"
        << q.plan();
    const int64_t N = got.dim(0);
    const double max_logit = gputest::max_abs(cpu);
    int64_t onednn_exact = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (same_row(cpu, ints, n)) {
        ++onednn_exact;
        EXPECT_TRUE(same_row(got, cpu, n)) << "sample " << n << " differs from Int8Model::forward";
      } else {
        for (int64_t j = 0; j < got.dim(1); ++j)
          EXPECT_NEAR(got.get({n, j}), cpu.get({n, j}), 0.02 * max_logit) << "sample " << n;
      }
    }
    // Tie flips are rare: most samples must be compared bit for bit with Int8Model::forward.
    EXPECT_GE(onednn_exact, N * 9 / 10) << "of " << N << " samples";
  }
};

TEST_F(CudaInt8ModelTest, CnnGivesTheCpuPlansLogits) {
  DnnlBackend be;
  for (bool per_channel : {true, false}) {
    SCOPED_TRACE(per_channel ? "per-channel weights" : "per-tensor weights");
    auto m = test::small_cnn(be, 11, /*dropout=*/true);
    const Dataset calib = test::random_images(96, 12, 1), data = test::random_images(64, 12, 2);
    Int8ModelOptions o;
    o.per_channel_weights = per_channel;
    const ActivationParams acts = test::calibrate_minmax(*m, be, calib);
    Int8Model q(*m, be, acts, o);
    ASSERT_NE(q.plan().find("flatten"), std::string::npos) << q.plan();
    check_against_cpu(q, *m, acts, o, test::images_of(data));
  }
}

TEST_F(CudaInt8ModelTest, MlpGivesTheCpuPlansLogits) {
  DnnlBackend be;
  for (bool per_channel : {true, false}) {
    SCOPED_TRACE(per_channel ? "per-channel weights" : "per-tensor weights");
    auto m = build_zoo_model("mlp");  // 784-512-256-10 on [N, 784] views of 28 x 28 images
    Rng rng(13);
    m->create_params(be, DType::f32, rng);
    const Dataset calib = test::random_images(96, 28, 3), data = test::random_images(50, 28, 4);
    Int8ModelOptions o;
    o.per_channel_weights = per_channel;
    const ActivationParams acts = test::calibrate_minmax(*m, be, calib);
    Int8Model q(*m, be, acts, o);
    check_against_cpu(q, *m, acts, o, test::images_of(data));
  }
}

TEST_F(CudaInt8ModelTest, IntegerMaxPoolAndReluKernelsMatchTheCpu) {
  Rng rng(gputest::base_seed() + 5);
  const PoolParams p{3, 3, 2, 2, 1, 1};  // padding: ignored positions, as on the CPU
  for (DType dt : {DType::u8, DType::s8}) {
    Tensor x = Tensor::empty({2, 5, 7, 7}, dt, Device::cpu(), MemoryFormat::channels_last);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.set_flat(i, (dt == DType::s8 ? -128.0 : 0.0) + static_cast<double>(rng.below(256)));
    const Tensor want = int8_maxpool2d(x, p);
    const Tensor dx = up(x, MemoryFormat::channels_last);
    Tensor dy = gpu().empty(want.shape(), dt, MemoryFormat::channels_last);
    LATHE_CUDA_CHECK(kernels::int8_maxpool_nhwc(gpu().context().stream(), dx.raw(), dt == DType::s8, 2, 5, 7, 7, 3, 3,
                                                2, 2, 1, 1, want.dim(2), want.dim(3), dy.raw()));
    const Tensor got = down(dy);
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_EQ(got.at_flat(i), want.at_flat(i)) << dtype_name(dt) << " max pool, element " << i;
    Tensor relu_want = x.contiguous_copy();
    int8_relu_inplace(relu_want, dt == DType::s8 ? -3 : 17);
    Tensor dr = up(x);
    LATHE_CUDA_CHECK(
        kernels::int8_relu(gpu().context().stream(), dr.raw(), dt == DType::s8, x.numel(), dt == DType::s8 ? -3 : 17));
    const Tensor relu_got = down(dr);
    for (int64_t i = 0; i < x.numel(); ++i)
      ASSERT_EQ(relu_got.at_flat(i), relu_want.at_flat(i)) << dtype_name(dt) << " relu, element " << i;
  }
}

// Needs no device: what the GPU executor covers is decided from the plan alone.
TEST_F(CudaInt8ModelTest, RefusesDynamicAndF32LayersAndCoversTheStaticCnn) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 17);
  const ActivationParams acts = test::calibrate_minmax(*m, be, test::random_images(32, 12, 5));
  EXPECT_EQ(Int8Model(*m, gpu(), acts).refusal(), "");
  EXPECT_EQ(Int8Model(*m, be, acts).refusal(), "");  // the CPU runs every plan
  Int8ModelOptions keep;
  keep.keep_f32 = {"7"};
  const std::string f32_why = Int8Model(*m, gpu(), acts, keep).refusal();
  EXPECT_NE(f32_why.find("runs in f32"), std::string::npos) << f32_why;
  Int8ModelOptions dyn;
  dyn.dynamic_activations = true;
  const std::string dyn_why = Int8Model(*m, gpu(), {}, dyn).refusal();
  EXPECT_NE(dyn_why.find("dynamic"), std::string::npos) << dyn_why;
}

// Needs no device: the integer oracle of the GPU tests agrees with Int8Model::forward bit for bit
// on nearly every sample here too (so a GPU failure is the GPU's, not the oracle's).
TEST(CudaInt8ModelPlan, IntegerOracleAgreesWithInt8ModelForward) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 11, /*dropout=*/true);
  Int8Model q(*m, be, test::calibrate_minmax(*m, be, test::random_images(96, 12, 1)));
  const Tensor x = test::images_of(test::random_images(64, 12, 2));
  const Tensor cpu = q.forward(x), ints = integer_plan(q, x);
  ASSERT_EQ(ints.shape(), cpu.shape());
  int64_t exact = 0;
  for (int64_t n = 0; n < cpu.dim(0); ++n)
    exact += same_row(cpu, ints, n);
  EXPECT_GE(exact, cpu.dim(0) * 9 / 10) << q.plan();
}

}  // namespace
}  // namespace lathe

#endif  // LATHE_HAVE_CUDA
