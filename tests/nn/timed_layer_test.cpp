// TimedLayer: a model whose every node is wrapped computes bit for bit what the plain model does
// (logits, parameter gradients, after an SGD step), and each node's calls and times are counted,
// a ReLU fused into the layer before it never being called forward (its backward still is).
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/exec/batch_loop.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/timed_layer.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

using test::mismatches;
using test::random_tensor;

TEST(TimedLayer, WrappedCnnTrainsBitForBitLikeThePlainOneAndCountsEveryNode) {
  DnnlBackend be;
  auto plain = build_zoo_model("cnn");
  auto timed_model = build_zoo_model("cnn");
  Rng r1(5), r2(5);
  plain->create_params(be, DType::f32, r1);
  timed_model->create_params(be, DType::f32, r2);
  const std::vector<TimedLayer*> timed = time_every_layer(*timed_model);
  ASSERT_EQ(timed.size(), timed_model->size());

  Rng data_rng(9);
  const Tensor x = random_tensor({8, 1, 28, 28}, data_rng);
  Tensor labels = Tensor::empty({8}, DType::s32);
  for (int64_t i = 0; i < 8; ++i)
    labels.set({i}, static_cast<double>(i % 10));
  Sgd s1(0.9, 0.0, false), s2(0.9, 0.0, false);
  Tensor d1, d2;
  for (uint64_t step = 0; step < 2; ++step) {
    LayerContext c1{be, true, step}, c2{be, true, step};
    const LossResult a = forward_backward(*plain, c1, x, labels, 1.0 / 8, d1);
    const LossResult b = forward_backward(*timed_model, c2, x, labels, 1.0 / 8, d2);
    EXPECT_EQ(a.loss_sum, b.loss_sum);
    EXPECT_EQ(mismatches(plain->output(), timed_model->output()), 0);
    auto p1 = plain->named_params(), p2 = timed_model->named_params();
    ASSERT_EQ(p1.size(), p2.size());
    for (size_t i = 0; i < p1.size(); ++i)
      EXPECT_EQ(mismatches(p1[i].param->grad, p2[i].param->grad), 0) << p1[i].name;
    s1.step(be, p1, 0.05);
    s2.step(be, p2, 0.05);
  }

  for (size_t i = 0; i < timed.size(); ++i) {
    const std::string& name = timed_model->node_name(i);
    const bool fused_relu = name == "1" || name == "4" || name == "8";
    SCOPED_TRACE(timed_model->node_name(i) + " " + timed[i]->describe());
    if (fused_relu) {  // cnn: conv 0 + ReLU 1, conv 3 + ReLU 4 and linear 7 + ReLU 8 are fused
      EXPECT_EQ(timed[i]->forward_calls(), 0);
      // ReLUs 1 and 4 feed a max pooling, which applies their backward mask (Model::relu_backward_folded);
      // ReLU 8's backward still runs as a pass of its own.
      EXPECT_EQ(timed_model->relu_backward_folded(i), name != "8");
      EXPECT_EQ(timed[i]->backward_calls(), name == "8" ? 2 : 0);
      continue;
    }
    EXPECT_EQ(timed[i]->forward_calls(), 2);
    EXPECT_EQ(timed[i]->backward_calls(), 2);
    EXPECT_GT(timed[i]->forward_seconds(), 0.0);
    EXPECT_GT(timed[i]->backward_seconds(), 0.0);
  }
  timed[0]->reset();
  EXPECT_EQ(timed[0]->forward_calls(), 0);
  EXPECT_EQ(timed[0]->forward_seconds(), 0.0);
  EXPECT_EQ(timed[0]->kind(), "conv2d");
}

}  // namespace
}  // namespace lathe
