// The INT8 plan hands a pooling that follows a single-channel conv to the conv's kernel where the
// cpu backend's kernel can (Int8Kernel::fuse_maxpool, backend/cpu/int8_conv_c1.h): the logits must
// be the reference backend's plan's to the bit (the pooled integers are the same), the plan must say
// what it fused, and a conv whose kernel cannot pool keeps its pooling step.
#include <gtest/gtest.h>

#include <memory>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/relu.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

/// The zoo cnn's shape at a smaller size: conv 1 -> 16 (a fusable first conv), conv 16 -> 16 (not:
/// 16 input channels), each with ReLU and a 2x2 pooling.
std::unique_ptr<Model> first_conv_cnn(Backend& be, uint64_t seed) {
  auto m = std::make_unique<Model>(Shape{1, 12, 12});
  m->add("0", std::make_unique<Conv2d>(1, 16, 3, 1, 1));
  m->add("1", std::make_unique<ReLU>());
  m->add("2", std::make_unique<MaxPool2d>(2));
  m->add("3", std::make_unique<Conv2d>(16, 16, 3, 1, 1));
  m->add("4", std::make_unique<ReLU>());
  m->add("5", std::make_unique<MaxPool2d>(2));
  m->add("6", std::make_unique<Flatten>());
  m->add("7", std::make_unique<Linear>(16 * 3 * 3, 10));
  Rng rng(seed);
  m->create_params(be, DType::f32, rng);
  return m;
}

int fused_poolings(const Int8Model& q) {
  int n = 0;
  for (const auto& s : q.steps())
    n += s->kind == Int8Model::Step::Kind::int8_maxpool && s->pool_fused;
  return n;
}

TEST(Int8PoolFusion, FusedFirstConvGivesTheReferencePlansLogitsExactly) {
  DnnlBackend be;
  ReferenceBackend ref;
  auto m = first_conv_cnn(be, 11);
  const Dataset calib = test::random_images(64, 12, 3), data = test::random_images(40, 12, 4);
  const ActivationParams acts = test::calibrate_minmax(*m, be, calib);
  Int8Model fast(*m, be, acts), oracle(*m, ref, acts);
  EXPECT_EQ(fused_poolings(oracle), 0) << oracle.plan();
  const int fused = fused_poolings(fast);
  EXPECT_LE(fused, 1) << "only the single-channel conv can pool in its kernel\n" << fast.plan();
  const Tensor x = test::images_of(data);
  const Tensor got = fast.forward(x), want = oracle.forward(x);
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(got.at_flat(i), want.at_flat(i)) << "logit " << i << "\n" << fast.plan();
  if (fused == 0)
    GTEST_SKIP() << "this CPU's kernels do not fuse pooling (no AVX512-VNNI): compared unfused plans only";
  EXPECT_NE(fast.plan().find("max pooling fused in"), std::string::npos) << fast.plan();
}

}  // namespace
}  // namespace lathe
