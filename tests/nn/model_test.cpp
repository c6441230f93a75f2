// Model graph: PyTorch state_dict names, hand-counted params and FLOPs, tapped activations, layer
// list validation, and the CPU backend matching the reference on a whole cnn forward/backward.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/exec/batch_loop.h"
#include "engine/nn/add.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/relu.h"
#include "engine/nn/timed_layer.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

TEST(Model, ZooNamesMatchPyTorchSequential) {
  auto cnn = build_zoo_model("cnn");
  ReferenceBackend be;
  Rng rng(0);
  cnn->create_params(be, DType::f32, rng);
  std::vector<std::string> names;
  for (auto& p : cnn->named_params())
    names.push_back(p.name + shape_str(p.param->value.shape()));
  EXPECT_EQ(names,
            (std::vector<std::string>{"0.weight[32, 1, 3, 3]", "0.bias[32]", "3.weight[64, 32, 3, 3]", "3.bias[64]",
                                      "7.weight[128, 3136]", "7.bias[128]", "9.weight[10, 128]", "9.bias[10]"}));
  // By hand: 32*9+32 + 64*32*9+64 + 3136*128+128 + 128*10+10
  EXPECT_EQ(cnn->param_count(), 320 + 18496 + 401536 + 1290);
  EXPECT_EQ(cnn->param_bytes(), 4 * cnn->param_count());
  // 2 * MACs: conv1 28*28*32*9, conv2 14*14*64*32*9, fc 3136*128, fc 128*10
  EXPECT_EQ(cnn->flops_per_sample(), 2 * (28 * 28 * 32 * 9 + 14 * 14 * 64 * 32 * 9 + 3136 * 128 + 128 * 10));
}

TEST(Model, InitialisationBoundsFollowPyTorch) {
  auto mlp = build_zoo_model("mlp");
  ReferenceBackend be;
  Rng rng(1);
  mlp->create_params(be, DType::f32, rng);
  const Tensor& w = mlp->named_params()[0].param->value;  // 0.weight, fan_in 784
  double mx = 0, mean = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    mx = std::max(mx, std::fabs(w.at_flat(i)));
    mean += w.at_flat(i);
  }
  EXPECT_LE(mx, 1.0 / 28.0);   // U(-1/sqrt(784), 1/sqrt(784))
  EXPECT_GT(mx, 0.99 / 28.0);  // and it fills that range
  EXPECT_NEAR(mean / w.numel(), 0.0, 1e-3);
}

TEST(Model, GradReadyHookSeesEveryParameterInReverseLayerOrderWithItsFinalGradient) {
  auto mlp = build_zoo_model("mlp");
  DnnlBackend be;
  Rng rng(3);
  mlp->create_params(be, DType::f32, rng);
  Tensor x = test::random_tensor({4, 784}, rng);
  LayerContext ctx{be, true, 0};
  const Tensor& out = mlp->forward(ctx, x);
  Tensor diff = test::random_tensor(out.shape(), rng);
  const auto params = mlp->named_params();
  std::vector<std::string> order;
  std::vector<double> seen_sum;  // a gradient's sum when the hook fired
  mlp->set_grad_ready_hook([&](const Param* p) {
    for (const auto& np : params)
      if (np.param == p) {
        order.push_back(np.name);
        double s = 0;
        for (int64_t i = 0; i < p->grad.numel(); ++i)
          s += p->grad.at_flat(i);
        seen_sum.push_back(s);
      }
  });
  mlp->backward(ctx, diff);
  mlp->set_grad_ready_hook({});
  ASSERT_EQ(order.size(), params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    // Each layer's weight and bias come together, the last layer first.
    const auto& np = params[params.size() - 1 - (k ^ 1)];
    EXPECT_EQ(order[k], np.name);
    double s = 0;
    for (int64_t i = 0; i < np.param->grad.numel(); ++i)
      s += np.param->grad.at_flat(i);
    EXPECT_EQ(seen_sum[k], s) << np.name << ": the gradient changed after the hook";
  }
}

TEST(Model, EveryNodeCanBeTappedAfterForward) {
  auto cnn = build_zoo_model("cnn");
  DnnlBackend be;
  Rng rng(2);
  cnn->create_params(be, DType::f32, rng);
  Tensor x = test::random_tensor({4, 1, 28, 28}, rng);
  LayerContext ctx{be, false, 0};
  cnn->forward(ctx, x);
  EXPECT_EQ(cnn->activation("2").shape(), (Shape{4, 32, 14, 14}));
  EXPECT_EQ(cnn->activation("6").shape(), (Shape{4, 3136}));
  EXPECT_EQ(cnn->activation("9").shape(), (Shape{4, 10}));
  EXPECT_TRUE(cnn->activation("input").same_memory(x));
  EXPECT_THROW(cnn->activation("nope"), ConfigError);
}

TEST(Model, CpuBackendMatchesReferenceOnAWholeCnnStep) {
  Rng rng(3);
  Tensor x = test::random_tensor({3, 1, 28, 28}, rng);
  Tensor labels = Tensor::empty({3}, DType::s32);
  for (int i = 0; i < 3; ++i)
    labels.set({i}, i);
  auto run = [&](Backend& be) {
    auto m = build_zoo_model("cnn");
    Rng init(7);
    m->create_params(be, DType::f32, init);
    LayerContext ctx{be, true, 0};
    Tensor diff;
    forward_backward(*m, ctx, x, labels, 1.0 / 3, diff);
    const Tensor& out = m->output();
    std::vector<Tensor> grads;
    for (auto& p : m->named_params())
      grads.push_back(p.param->grad.contiguous_copy());
    return std::make_pair(out.contiguous_copy(), grads);
  };
  ReferenceBackend ref;
  DnnlBackend cpu;
  auto [out_ref, g_ref] = run(ref);
  auto [out_cpu, g_cpu] = run(cpu);
  EXPECT_TRUE(test::all_close(out_cpu, out_ref, 1e-4, 1e-5));
  for (size_t i = 0; i < g_ref.size(); ++i)
    EXPECT_TRUE(test::all_close(g_cpu[i], g_ref[i], 1e-3, 1e-5)) << "grad " << i;
}

TEST(Model, FusedReluGivesTheSameOutputsAndGradients) {
  Rng rng(4);
  Tensor x = test::random_tensor({5, 1, 28, 28}, rng);
  Tensor labels = Tensor::empty({5}, DType::s32);
  for (int i = 0; i < 5; ++i)
    labels.set({i}, i);
  DnnlBackend be;
  auto run = [&](bool fuse) {
    auto m = build_zoo_model("cnn");
    m->set_fuse_relu(fuse);
    Rng init(11);
    m->create_params(be, DType::f32, init);
    LayerContext ctx{be, true, 0};
    Tensor diff;
    forward_backward(*m, ctx, x, labels, 1.0 / 5, diff);
    const Tensor& out = m->output();
    std::vector<Tensor> r{out.contiguous_copy(), m->activation("1").contiguous_copy()};
    for (auto& p : m->named_params())
      r.push_back(p.param->grad.contiguous_copy());
    if (fuse) {
      EXPECT_THROW(m->activation("0"), ConfigError);  // the pre-ReLU conv output is never materialised
    } else {
      EXPECT_NO_THROW(m->activation("0"));
    }
    return r;
  };
  const auto fused = run(true), plain = run(false);
  ASSERT_EQ(fused.size(), plain.size());
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_TRUE(test::all_close(fused[i], plain[i], 1e-5, 1e-6)) << i;
}

// The backward of a ReLU feeding a max pooling is folded into the pooling (it masks the pooled
// gradient): the ReLU's own backward never runs, and the gradients are those of the plain graph,
// also with a gradient entering at the ReLU from outside (then the ReLU's backward runs after all).
TEST(Model, ReluBackwardFoldedIntoThePoolingGivesThePlainGradients) {
  Rng rng(5);
  Tensor x = test::random_tensor({4, 1, 28, 28}, rng);
  Tensor labels = Tensor::empty({4}, DType::s32);
  for (int i = 0; i < 4; ++i)
    labels.set({i}, i);
  DnnlBackend be;
  Tensor extra;
  auto run = [&](bool fuse, bool with_extra) {
    auto m = build_zoo_model("cnn");
    m->set_fuse_relu(fuse);
    Rng init(13);
    m->create_params(be, DType::f32, init);
    EXPECT_EQ(m->relu_backward_folded(1), fuse);  // relu '1' -> maxpool '2'
    EXPECT_EQ(m->relu_backward_folded(4), fuse);  // relu '4' -> maxpool '5'
    EXPECT_FALSE(m->relu_backward_folded(8));     // relu '8' -> linear '9'
    std::vector<TimedLayer*> timed = time_every_layer(*m);
    std::vector<Tensor> r;
    for (int step = 0; step < 2; ++step) {  // the second step reuses the shared gradient buffers
      LayerContext ctx{be, true, static_cast<uint64_t>(step)};
      const Tensor& logits = m->forward(ctx, x);
      Tensor diff = be.empty(logits.shape(), DType::f32);
      be.softmax_cross_entropy(logits, labels, &diff, 0.25);
      if (with_extra && step == 1) {  // a step without, then one with: the shared buffer is split again
        if (!extra.defined())         // the same extra gradient for every run
          extra = test::random_tensor({4, 32, 28, 28}, rng, DType::f32, MemoryFormat::channels_last, -0.01, 0.01);
        m->backward(ctx, diff, {{1, &extra}});
      } else {
        m->backward(ctx, diff);
      }
    }
    EXPECT_EQ(timed[1]->backward_calls(), fuse ? (with_extra ? 1 : 0) : 2) << "relu '1' backward";
    for (auto& p : m->named_params())
      r.push_back(p.param->grad.contiguous_copy());
    return r;
  };
  for (bool with_extra : {false, true}) {
    const auto folded = run(true, with_extra), plain = run(false, with_extra);
    ASSERT_EQ(folded.size(), plain.size());
    for (size_t i = 0; i < folded.size(); ++i)
      EXPECT_TRUE(test::all_close(folded[i], plain[i], 1e-5, 1e-6)) << "grad " << i << " extra " << with_extra;
  }
}

TEST(Model, LayerListErrorsNameThePosition) {
  const auto bad_type = nlohmann::json::parse(R"([{"type": "linear", "out": 10}, {"type": "softmaxx"}])");
  try {
    build_model_from_layers(bad_type, {784});
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers[1].type"), std::string::npos) << e.what();
  }
  const auto needs_flatten = nlohmann::json::parse(R"([{"type": "linear", "out": 10}])");
  EXPECT_THROW(build_model_from_layers(needs_flatten, {1, 28, 28}), ConfigError);
  const auto bad_key = nlohmann::json::parse(R"([{"type": "relu", "inplace": true}])");
  EXPECT_THROW(build_model_from_layers(bad_key, {4}), ConfigError);
  const auto bad_input = nlohmann::json::parse(R"([{"type": "relu"}, {"type": "add", "inputs": ["0", "9"]}])");
  EXPECT_THROW(build_model_from_layers(bad_input, {4}), ConfigError);
}

TEST(Optimizer, StateOfListsEachParametersStateAfterItsFirstStep) {
  ReferenceBackend be;
  auto m = build_zoo_model("student");
  Rng rng(5);
  m->create_params(be, DType::f32, rng);
  auto params = m->named_params();
  Sgd sgd(0.9, 0, false);
  AdamW adam(0.9, 0.999, 1e-8, 0.01);
  EXPECT_TRUE(sgd.state_of(params[0].param).empty());
  EXPECT_TRUE(adam.state_of(params[0].param).empty());
  sgd.step(be, params, 0.1);
  adam.step(be, params, 0.001);
  ASSERT_EQ(sgd.state_of(params[0].param).size(), 1u);
  ASSERT_EQ(adam.state_of(params[0].param).size(), 2u);
  EXPECT_EQ(sgd.state_of(params[0].param)[0]->shape(), params[0].param->value.shape());
  Sgd plain(0.0, 0, false);  // no momentum: no state
  plain.step(be, params, 0.1);
  EXPECT_TRUE(plain.state_of(params[0].param).empty());
}

TEST(Layer, FreshCopyHasTheSameKindConfigurationAndShapes) {
  std::vector<std::pair<std::unique_ptr<Layer>, Shape>> cases;
  cases.emplace_back(std::make_unique<Linear>(12, 5, false), Shape{2, 12});
  cases.emplace_back(std::make_unique<Conv2d>(3, 8, 5, 2, 1, true), Shape{2, 3, 11, 11});
  cases.emplace_back(std::make_unique<MaxPool2d>(3, 2, 1), Shape{2, 3, 11, 11});
  cases.emplace_back(std::make_unique<BatchNorm2d>(3, 1e-3, 0.2), Shape{2, 3, 4, 4});
  cases.emplace_back(std::make_unique<Dropout>(0.25, 9), Shape{2, 7});
  cases.emplace_back(std::make_unique<ReLU>(), Shape{2, 7});
  cases.emplace_back(std::make_unique<Flatten>(), Shape{2, 3, 4, 4});
  for (const auto& [layer, in] : cases) {
    const std::unique_ptr<Layer> copy = layer->fresh_copy();
    ASSERT_TRUE(copy) << layer->describe();
    EXPECT_EQ(copy->kind(), layer->kind());
    EXPECT_EQ(copy->describe(), layer->describe());
    EXPECT_EQ(copy->output_shape({in}), layer->output_shape({in})) << layer->describe();
  }
  const auto dropout_copy = Dropout(0.25, 9).fresh_copy();
  EXPECT_EQ(static_cast<const Dropout&>(*dropout_copy).p(), 0.25);
  EXPECT_EQ(static_cast<const Dropout&>(*dropout_copy).seed(), 9u);
  Add add;
  EXPECT_EQ(add.fresh_copy()->kind(), "add");
  BatchNorm2d bn(3, 1e-3, 0.2);
  const auto bn_copy = bn.fresh_copy();
  EXPECT_EQ(static_cast<const BatchNorm2d&>(*bn_copy).bn_params().eps, 1e-3);
  EXPECT_EQ(static_cast<const BatchNorm2d&>(*bn_copy).bn_params().momentum, 0.2);
}

}  // namespace
}  // namespace lathe
