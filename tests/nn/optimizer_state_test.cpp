// Optimizer state out and in (checkpoints): an optimizer restored from state_tensors() takes the
// same next step as the one it was saved from, bit for bit (SGD with Nesterov momentum, AdamW with
// its step counter in the bias correction), and bad state is refused naming the tensor.
#include <gtest/gtest.h>

#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/nn/optimizer.h"
#include "engine/nn/zoo.h"
#include "tests/support/random_tensor.h"

namespace lathe {
namespace {

void random_grads(const std::vector<NamedParam>& params, Rng& rng) {
  for (const NamedParam& p : params)
    p.param->grad = test::random_tensor(p.param->value.shape(), rng);
}

std::unique_ptr<Model> fresh_model(Backend& be) {
  auto m = build_zoo_model("student");
  Rng rng(11);
  m->create_params(be, DType::f32, rng);
  return m;
}

void copy_weights(Backend& be, Model& from, Model& to) {
  auto a = from.named_params(), b = to.named_params();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    be.copy(a[i].param->value, b[i].param->value);
}

// Steps `saved` three times, restores its state into a new optimizer on a copy of the model, then
// takes one more step with the same gradients on both.
void expect_restored_step_is_identical(Backend& be, Optimizer& saved, Optimizer& restored) {
  auto m1 = fresh_model(be), m2 = fresh_model(be);
  auto p1 = m1->named_params(), p2 = m2->named_params();
  Rng rng(7);
  for (int i = 0; i < 3; ++i) {
    random_grads(p1, rng);
    saved.step(be, p1, 0.01);
  }
  const auto state = saved.state_tensors(be, p1);
  ASSERT_EQ(state.size(), p1.size() * saved.state_kinds().size());
  copy_weights(be, *m1, *m2);
  restored.load_state_tensors(be, p2, std::map<std::string, Tensor>(state.begin(), state.end()), saved.steps_taken());
  EXPECT_EQ(restored.steps_taken(), 3);

  Rng same(99);
  random_grads(p1, same);
  Rng again(99);
  random_grads(p2, again);
  saved.step(be, p1, 0.01);
  restored.step(be, p2, 0.01);
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_EQ(test::mismatches(p1[i].param->value, p2[i].param->value), 0) << p1[i].name;
    const auto s1 = saved.state_of(p1[i].param), s2 = restored.state_of(p2[i].param);
    ASSERT_EQ(s1.size(), s2.size());
    for (size_t k = 0; k < s1.size(); ++k)
      EXPECT_EQ(test::mismatches(*s1[k], *s2[k]), 0) << p1[i].name << " state " << k;
  }
}

TEST(OptimizerState, RestoredSgdTakesTheSameNextStepBitForBit) {
  DnnlBackend be;
  Sgd a(0.9, 1e-4, true), b(0.9, 1e-4, true);
  expect_restored_step_is_identical(be, a, b);
}

TEST(OptimizerState, RestoredAdamWTakesTheSameNextStepBitForBit) {
  DnnlBackend be;
  AdamW a(0.9, 0.999, 1e-8, 0.01), b(0.9, 0.999, 1e-8, 0.01);
  expect_restored_step_is_identical(be, a, b);
}

TEST(OptimizerState, NamesFollowPyTorchAndCopiesDoNotAlias) {
  ReferenceBackend be;
  auto m = fresh_model(be);
  auto params = m->named_params();
  AdamW adam(0.9, 0.999, 1e-8, 0);
  EXPECT_TRUE(adam.state_tensors(be, params).empty());  // no state before the first step
  Rng rng(1);
  random_grads(params, rng);
  adam.step(be, params, 0.01);
  auto state = adam.state_tensors(be, params);
  EXPECT_EQ(state[0].first, params[0].name + ".exp_avg");
  EXPECT_EQ(state[1].first, params[0].name + ".exp_avg_sq");
  const double before = state[0].second.at_flat(0);
  adam.step(be, params, 0.01);
  EXPECT_EQ(state[0].second.at_flat(0), before);  // a snapshot, not the live buffer
}

TEST(OptimizerState, BadStateIsRefusedNamingTheTensor) {
  ReferenceBackend be;
  auto m = fresh_model(be);
  auto params = m->named_params();
  const std::string w = params[0].name;
  Sgd sgd(0.9, 0, false);
  std::map<std::string, Tensor> wrong_shape{{w + ".momentum_buffer", Tensor::zeros({3}, DType::f32)}};
  try {
    sgd.load_state_tensors(be, params, wrong_shape, 1);
    FAIL() << "a wrong shape was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(w + ".momentum_buffer"), std::string::npos) << e.what();
  }
  std::map<std::string, Tensor> stranger{{"nope.momentum_buffer", Tensor::zeros({3}, DType::f32)}};
  EXPECT_THROW(sgd.load_state_tensors(be, params, stranger, 1), DataError);
  AdamW adam(0.9, 0.999, 1e-8, 0);
  std::map<std::string, Tensor> half{
      {w + ".exp_avg", Tensor::zeros(params[0].param->value.shape(), DType::f32)}};  // exp_avg_sq missing
  EXPECT_THROW(adam.load_state_tensors(be, params, half, 1), DataError);
}

}  // namespace
}  // namespace lathe
