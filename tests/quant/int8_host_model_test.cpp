// The host copy the quantize stage runs CPU INT8 from when the experiment's model is on a GPU: same
// nodes, settings and weights, so its f32 outputs and its INT8 plan's logits equal the original's
// bit for bit, residual graphs with their BatchNorm statistics included.
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

TEST(Int8HostModel, CopiesResidualGraphsWithTheirBatchNormStatistics) {
  DnnlBackend be;
  auto m = test::residual_graph(be, 23);  // BatchNorm statistics set away from their defaults
  auto c = int8_host_model(*m, be, be);
  ASSERT_EQ(c->size(), m->size());
  for (size_t i = 0; i < m->size(); ++i) {
    EXPECT_EQ(c->node_name(i), m->node_name(i));
    EXPECT_EQ(c->node_inputs(i), m->node_inputs(i)) << m->node_name(i);
  }
  const Tensor x = test::images_of(test::random_images(8, 8, 24));
  LayerContext ctx{be, false, 0};
  const Tensor f = m->forward(ctx, x).contiguous_copy(), g = c->forward(ctx, x).contiguous_copy();
  EXPECT_EQ(test::mismatches(f, g), 0) << "running mean/var or the residual input not copied";
  const ActivationParams acts = test::calibrate_minmax(*m, be, test::random_images(32, 8, 25));
  Int8Model qm(*m, be, acts), qc(*c, be, acts);
  EXPECT_EQ(qc.plan(), qm.plan());
  EXPECT_EQ(test::mismatches(qc.forward(x), qm.forward(x)), 0);
}

}  // namespace
}  // namespace lathe
