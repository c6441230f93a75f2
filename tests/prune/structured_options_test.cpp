// Structured pruning, choices and guards: which channels L1 vs L2 keep on hand-set weights, global
// (normalised) vs per-layer counts, the minimum kept per layer, exclusions leaving layers untouched,
// groups that may not be pruned (model input, model output), and rejected options naming the field.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/backend/cpu/reference_backend.h"
#include "tests/prune/structured_test_models.h"

namespace lathe {
namespace {

using test::in_channels;
using test::init_model;
using test::out_channels;

Tensor& param(Model& m, const std::string& name) {
  for (NamedParam& np : m.named_params())
    if (np.name == name)
      return np.param->value;
  throw std::runtime_error("no param " + name);
}

void set_rows(Model& m, const std::string& name, const std::vector<std::vector<double>>& rows) {
  Tensor& w = param(m, name + ".weight");
  ASSERT_EQ(w.dim(0), static_cast<int64_t>(rows.size()));
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t k = 0; k < rows[r].size(); ++k)
      w.set({static_cast<int64_t>(r), static_cast<int64_t>(k)}, rows[r][k]);
}

/// input {3} -> "a" linear(3 -> 4) -> relu -> "b" linear(4 -> 4) -> relu -> "out" linear(4 -> 2).
std::unique_ptr<Model> three_linears(ReferenceBackend& be) {
  auto m = build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "linear", "name": "a", "out": 4}, {"type": "relu", "name": "ra"},
    {"type": "linear", "name": "b", "out": 4}, {"type": "relu", "name": "rb"},
    {"type": "linear", "name": "out", "out": 2}])"),
                                   {3});
  init_model(*m, be, DType::f64, 0);
  return m;
}

std::vector<int64_t> kept_of(const StructuredPlan& plan, Model& m, const std::string& node) {
  return plan.kept[plan.graph.output_group[m.find(node)]];
}

TEST(StructuredOptions, L1AndL2RankDifferently) {
  // Row 1 = (3, 0, 0): L1 3, L2 3. Row 2 = (1.1, 1.1, 1.1): L1 3.3, L2 1.905. Rows 0 and 3 are small.
  ReferenceBackend be;
  auto m = three_linears(be);
  set_rows(*m, "a", {{0.1, 0, 0}, {3, 0, 0}, {1.1, 1.1, 1.1}, {0.2, 0.1, 0}});
  StructuredOptions o;
  o.ratio = 0.75;  // keep one of four
  o.norm = StructuredNorm::l1;
  EXPECT_EQ(kept_of(plan_structured(*m, be, o), *m, "a"), (std::vector<int64_t>{2}));
  o.norm = StructuredNorm::l2;
  EXPECT_EQ(kept_of(plan_structured(*m, be, o), *m, "a"), (std::vector<int64_t>{1}));
}

TEST(StructuredOptions, ChannelNormsAreTheRowNorms) {
  ReferenceBackend be;
  auto m = three_linears(be);
  set_rows(*m, "a", {{1, -2, 2}, {0, 0, 0}, {-3, 0, 4}, {0.5, 0, 0}});
  const auto l1 = channel_norms(*m, be, m->find("a"), StructuredNorm::l1);
  const auto l2 = channel_norms(*m, be, m->find("a"), StructuredNorm::l2);
  EXPECT_EQ(l1, (std::vector<double>{5, 0, 7, 0.5}));
  EXPECT_EQ(l2, (std::vector<double>{3, 0, 5, 0.5}));
}

TEST(StructuredOptions, GlobalScopeComparesLayersByNormalisedScores) {
  // a: norms 1, 2, 3, 4 (mean 2.5 -> 0.4, 0.8, 1.2, 1.6); b: 10, 10, 10, 50 (mean 20 -> 0.5, 0.5,
  // 0.5, 2.5). Global, ratio 0.5: the four lowest of eight are a0, b0, b1, b2. Per layer: two each.
  ReferenceBackend be;
  auto m = three_linears(be);
  set_rows(*m, "a", {{1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0}});
  set_rows(*m, "b", {{10, 0, 0, 0}, {0, 10, 0, 0}, {0, 0, 10, 0}, {50, 0, 0, 0}});
  StructuredOptions o;
  o.ratio = 0.5;
  o.scope = StructuredScope::global;
  const StructuredPlan g = plan_structured(*m, be, o);
  EXPECT_EQ(kept_of(g, *m, "a"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(kept_of(g, *m, "b"), (std::vector<int64_t>{3}));
  o.scope = StructuredScope::layer;
  const StructuredPlan l = plan_structured(*m, be, o);
  EXPECT_EQ(kept_of(l, *m, "a"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(kept_of(l, *m, "b"), (std::vector<int64_t>{2, 3}));  // ties: the earlier channel goes first
  EXPECT_EQ(kept_of(l, *m, "out"), (std::vector<int64_t>{0, 1}));
}

TEST(StructuredOptions, EveryLayerKeepsAtLeastMinChannels) {
  ReferenceBackend be;
  auto m = three_linears(be);
  set_rows(*m, "a", {{1e-6, 0, 0}, {1e-6, 0, 0}, {1e-6, 0, 0}, {2e-6, 0, 0}});
  set_rows(*m, "b", {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}});
  StructuredOptions o;
  o.ratio = 0.99;
  for (auto scope : {StructuredScope::layer, StructuredScope::global}) {
    o.scope = scope;
    auto p = prune_structured(*m, be, o);
    EXPECT_EQ(out_channels(*p, "a"), 1);
    EXPECT_EQ(out_channels(*p, "b"), 1);
    EXPECT_EQ(out_channels(*p, "out"), 2);
  }
  o.min_channels = 2;
  o.scope = StructuredScope::global;
  auto p = prune_structured(*m, be, o);
  EXPECT_EQ(out_channels(*p, "a"), 2);
  EXPECT_EQ(out_channels(*p, "b"), 2);
}

TEST(StructuredOptions, ExcludedLayersAreUntouched) {
  ReferenceBackend be;
  auto m = build_zoo_model("cnn");
  init_model(*m, be, DType::f32, 4);
  StructuredOptions o;
  o.ratio = 0.5;
  o.exclude = {"0"};
  StructuredReport r;
  auto p = prune_structured(*m, be, o, &r);
  EXPECT_EQ(out_channels(*p, "0"), 32);
  EXPECT_EQ(in_channels(*p, "3"), 32);
  EXPECT_EQ(out_channels(*p, "3"), 32);
  EXPECT_NE(r.layers[0].not_pruned_because.find("excluded"), std::string::npos);
  const Tensor& w0 = param(*m, "0.weight");
  const Tensor& pw0 = param(*p, "0.weight");
  for (int64_t i = 0; i < w0.numel(); ++i)
    ASSERT_EQ(pw0.at_flat(i), w0.at_flat(i));

  // Excluding a layer and the one before it keeps it whole: inputs and outputs.
  o.exclude = {"0", "3"};
  auto q = prune_structured(*m, be, o);
  EXPECT_EQ(out_channels(*q, "3"), 64);
  EXPECT_EQ(in_channels(*q, "7"), 3136);
  EXPECT_EQ(out_channels(*q, "7"), 64);
  const Tensor& w3 = param(*m, "3.weight");
  const Tensor& qw3 = param(*q, "3.weight");
  ASSERT_EQ(qw3.shape(), w3.shape());
  for (int64_t i = 0; i < w3.numel(); ++i)
    ASSERT_EQ(qw3.at_flat(i), w3.at_flat(i));
  const Tensor& b3 = param(*m, "3.bias");
  for (int64_t i = 0; i < b3.numel(); ++i)
    ASSERT_EQ(param(*q, "3.bias").at_flat(i), b3.at_flat(i));

  // Naming the last layer is allowed (it is never pruned anyway).
  o.exclude = {"9"};
  EXPECT_EQ(out_channels(*prune_structured(*m, be, o), "9"), 10);
}

TEST(StructuredOptions, OutputAndInputGroupsAreNeverPruned) {
  ReferenceBackend be;
  // A residual Add with the model input: the conv feeding it must keep every channel.
  auto m = build_model_from_layers(nlohmann::json::parse(R"([
    {"type": "conv2d", "name": "c0", "out": 2, "kernel": 3, "padding": 1},
    {"type": "add", "name": "sum", "inputs": ["c0", "input"]},
    {"type": "conv2d", "name": "c1", "out": 4, "kernel": 3, "padding": 1},
    {"type": "relu", "name": "r"},
    {"type": "flatten", "name": "f"},
    {"type": "linear", "name": "fc", "out": 3}])"),
                                   {2, 4, 4});
  init_model(*m, be, DType::f64, 0);
  StructuredOptions o;
  o.ratio = 0.5;
  StructuredReport r;
  auto p = prune_structured(*m, be, o, &r);
  EXPECT_EQ(out_channels(*p, "c0"), 2);
  EXPECT_NE(r.layers[0].not_pruned_because.find("model input"), std::string::npos) << r.layers[0].not_pruned_because;
  EXPECT_EQ(out_channels(*p, "c1"), 2);
  EXPECT_EQ(in_channels(*p, "fc"), 2 * 16);
  EXPECT_EQ(out_channels(*p, "fc"), 3);
}

TEST(StructuredOptions, RatioZeroKeepsEverything) {
  ReferenceBackend be;
  auto m = build_zoo_model("mlp");
  init_model(*m, be, DType::f32, 0);
  StructuredOptions o;
  o.ratio = 0;
  StructuredReport r;
  auto p = prune_structured(*m, be, o, &r);
  EXPECT_EQ(r.params_after, r.params_before);
  EXPECT_DOUBLE_EQ(r.flops_ratio(), 1.0);
}

void expect_config_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const ConfigError& e) {
    for (const std::string& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what() << " lacks '" << part << "'";
  }
}

TEST(StructuredOptions, BadOptionsAreRejectedNamingTheField) {
  ReferenceBackend be;
  auto m = build_zoo_model("cnn");
  init_model(*m, be, DType::f32, 0);
  for (double bad : {-0.1, 1.0, 1.5, std::nan("")}) {
    StructuredOptions o;
    o.ratio = bad;
    expect_config_error([&] { plan_structured(*m, be, o); }, {"prune.ratio", "allowed"});
  }
  StructuredOptions o;
  o.exclude = {"nope"};
  expect_config_error([&] { plan_structured(*m, be, o); }, {"prune.exclude", "'nope'", "0, 3, 7, 9"});
  o.exclude = {"1"};
  expect_config_error([&] { plan_structured(*m, be, o); }, {"prune.exclude", "'1'", "relu"});
  o.exclude = {};
  o.min_channels = 0;
  expect_config_error([&] { plan_structured(*m, be, o); }, {"min_channels"});
}

}  // namespace
}  // namespace lathe
