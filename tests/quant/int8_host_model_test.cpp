// The host copy the quantize stage runs CPU INT8 from when the experiment's model is on a GPU: same
// nodes, settings and weights, so its f32 outputs and its INT8 plan's logits equal the original's
// bit for bit; models INT8 does not cover are refused, naming the node.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/compress/quant/int8_host_model.h"
#include "engine/nn/batchnorm2d.h"
#include "tests/quant/int8_test_models.h"

namespace lathe {
namespace {

TEST(Int8HostModel, CopiesNodesWeightsAndTheInt8Plan) {
  DnnlBackend be;
  auto m = test::small_cnn(be, 21, /*dropout=*/true);
  auto c = int8_host_model(*m, be, be);
  ASSERT_EQ(c->size(), m->size());
  for (size_t i = 0; i < m->size(); ++i) {
    EXPECT_EQ(c->node_name(i), m->node_name(i));
    EXPECT_EQ(c->layer(i).describe(), m->layer(i).describe());
  }
  const Tensor x = test::images_of(test::random_images(16, 12, 7));
  LayerContext ctx{be, false, 0};
  const Tensor f = m->forward(ctx, x), g = c->forward(ctx, x);
  EXPECT_EQ(test::mismatches(f, g), 0);
  const ActivationParams acts = test::calibrate_minmax(*m, be, test::random_images(32, 12, 8));
  Int8Model qm(*m, be, acts), qc(*c, be, acts);
  EXPECT_EQ(qc.plan(), qm.plan());
  EXPECT_EQ(test::mismatches(qc.forward(x), qm.forward(x)), 0);
}

TEST(Int8HostModel, RefusesWhatInt8DoesNotCover) {
  DnnlBackend be;
  Model m(Shape{1, 8, 8});
  m.add("0", std::make_unique<Conv2d>(1, 4, 3, 1, 1));
  m.add("bn", std::make_unique<BatchNorm2d>(4));
  m.add("2", std::make_unique<Flatten>());
  m.add("3", std::make_unique<Linear>(256, 10));
  Rng rng(1);
  m.create_params(be, DType::f32, rng);
  try {
    int8_host_model(m, be, be);
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'bn'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lathe
