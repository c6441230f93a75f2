// plan_lowrank / build_lowrank_model: SVD of every candidate Linear/Conv2d weight, rank choice
// (rank_select.h), and the factored Model rebuilt through the ordinary Model API.
#include "engine/compress/lowrank/factorize.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "engine/compress/lowrank/rank_select.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

namespace {

/// The tensor's values in logical (row-major NCHW) order, as doubles.
std::vector<double> host_values(Backend& be, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  be.copy(t, host);
  std::vector<double> out(static_cast<size_t>(host.numel()));
  for (int64_t i = 0; i < host.numel(); ++i)
    out[static_cast<size_t>(i)] = host.at_flat(i);
  return out;
}

/// Writes `values` (logical order) into `dst` on its device.
void store_values(Backend& be, const std::vector<double>& values, Tensor& dst) {
  LATHE_CHECK(static_cast<int64_t>(values.size()) == dst.numel(), "low-rank: ", values.size(), " values for ",
              dst.describe());
  Tensor host = Tensor::empty(dst.shape(), dst.dtype());
  for (int64_t i = 0; i < host.numel(); ++i)
    host.set_flat(i, values[static_cast<size_t>(i)]);
  be.copy(host, dst);
}

Param& param_named(Layer& layer, const std::string& name) {
  for (Param* p : layer.params())
    if (p->name == name)
      return *p;
  LATHE_CHECK(false, "low-rank: a ", layer.kind(), " layer has no parameter '", name, "'");
  throw Error("unreachable");
}

bool is_matmul(const std::string& kind) { return kind == "linear" || kind == "conv2d"; }

std::string reason_not_saving(int64_t rows, int64_t cols, int64_t rank) {
  if (rank < 1)
    return "even rank 1 takes more than the bytes target";
  return "rank " + std::to_string(rank) + " takes " + std::to_string(rank * (rows + cols)) +
         " values, not fewer than the dense " + std::to_string(rows * cols);
}

}  // namespace

void validate_lowrank_options(const LowRankOptions& o) {
  if (o.rank < 0)
    throw ConfigError("lowrank.rank: " + std::to_string(o.rank) + " is negative; allowed: 0 (chosen) or a rank >= 1");
  if (!(o.energy >= 0 && o.energy <= 1))
    throw ConfigError("lowrank.energy: " + std::to_string(o.energy) +
                      " is not a kept-energy fraction; allowed: 0 (use the bytes target) or a number in (0, 1]");
  if (!(o.target_bytes_ratio > 0 && o.target_bytes_ratio < 1))
    throw ConfigError("lowrank.target_bytes_ratio: " + std::to_string(o.target_bytes_ratio) +
                      " is not a fraction of the dense bytes; allowed: a number in (0, 1)");
}

void check_lowrank_model(Model& model, const LowRankOptions& options) {
  validate_lowrank_options(options);
  for (const std::string& name : options.exclude) {
    const int i = model.find(name);
    if (i < 0 || !is_matmul(model.layer(static_cast<size_t>(i)).kind()))
      throw ConfigError("lowrank.exclude: '" + name + "' is not a linear or conv2d layer of the model");
  }
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& layer = model.layer(i);
    if (layer.kind() == "conv2d") {
      const ConvParams& p = static_cast<const Conv2d&>(layer).conv_params();
      if (p.stride_h != p.stride_w || p.pad_h != p.pad_w)
        throw ConfigError("lowrank: conv2d '" + model.node_name(i) +
                          "' has a rectangular stride or padding; only square ones can be factored");
    }
    if (!layer.fresh_copy())
      throw ConfigError("lowrank: cannot rebuild layer '" + model.node_name(i) + "' of kind " + layer.kind() +
                        "; supported: linear, conv2d, batchnorm2d, maxpool2d, dropout, relu, flatten, add");
  }
}

LowRankPlan plan_lowrank(Model& model, Backend& be, const LowRankOptions& options) {
  check_lowrank_model(model, options);
  LowRankPlan plan;
  LowRankReport& rep = plan.report;
  std::vector<size_t> candidates;  // indices into rep.layers
  std::vector<LayerSpectrum> spectra;
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& layer = model.layer(i);
    const std::string kind = layer.kind();
    if (!is_matmul(kind))
      continue;
    LowRankLayer l;
    l.name = model.node_name(i);
    l.kind = kind;
    if (kind == "linear") {
      const auto& lin = static_cast<const Linear&>(layer);
      l.rows = lin.out_features();
      l.cols = lin.in_features();
    } else {
      const auto& conv = static_cast<const Conv2d&>(layer);
      l.rows = conv.out_channels();
      l.cols = conv.in_channels() * conv.kernel() * conv.kernel();
    }
    l.weight_values_before = l.weight_values_after = l.rows * l.cols;
    rep.weight_values_before += l.weight_values_before;
    Svd svd;
    if (std::find(options.exclude.begin(), options.exclude.end(), l.name) != options.exclude.end()) {
      l.dense_because = "excluded (lowrank.exclude)";
    } else {
      svd = svd_jacobi(host_values(be, param_named(layer, "weight").value), l.rows, l.cols);
      candidates.push_back(rep.layers.size());
      spectra.push_back({l.rows, l.cols, svd.s});
    }
    rep.layers.push_back(l);
    plan.node.push_back(static_cast<int>(i));
    plan.svd.push_back(std::move(svd));
  }

  // ---- ranks ----
  std::vector<int64_t> ranks(candidates.size(), 0);
  const bool global = options.scope == LowRankScope::global;
  if (options.rank > 0) {
    for (size_t c = 0; c < candidates.size(); ++c)
      ranks[c] = std::min<int64_t>(options.rank, static_cast<int64_t>(spectra[c].sigma.size()));
  } else if (options.energy > 0) {
    if (global)
      ranks = global_ranks_for_energy(spectra, options.energy);
    else
      for (size_t c = 0; c < candidates.size(); ++c)
        ranks[c] = rank_for_energy(spectra[c].sigma, options.energy);
  } else {
    if (global)
      ranks = global_ranks_for_bytes_ratio(spectra, options.target_bytes_ratio);
    else
      for (size_t c = 0; c < candidates.size(); ++c)
        ranks[c] = rank_for_bytes_ratio(spectra[c].rows, spectra[c].cols, options.target_bytes_ratio);
  }

  for (size_t c = 0; c < candidates.size(); ++c) {
    LowRankLayer& l = rep.layers[candidates[c]];
    const int64_t r = ranks[c];
    if (!saves_bytes(l.rows, l.cols, r)) {
      const bool budget_kept_dense =
          global && options.rank == 0 && options.energy == 0 && r == 0 && max_saving_rank(l.rows, l.cols) >= 1;
      l.dense_because = budget_kept_dense ? "the budget reached its saving cap and covers its dense size"
                                          : reason_not_saving(l.rows, l.cols, r);
      plan.svd[candidates[c]] = Svd{};
      continue;
    }
    const std::vector<double>& s = spectra[c].sigma;
    double total = 0;
    for (double x : s)
      total += x * x;
    l.rank = r;
    l.kept_energy = total > 0 ? 1 - discarded_energy(s, r) / total : 1;
    l.weight_values_after = r * (l.rows + l.cols);
  }
  rep.params_before = model.param_count();
  rep.params_after = rep.params_before;
  for (const LowRankLayer& l : rep.layers) {
    rep.weight_values_after += l.weight_values_after;
    rep.params_after -= l.weight_values_before - l.weight_values_after;
  }
  return plan;
}

std::unique_ptr<Model> build_lowrank_model(Model& model, Backend& be, const LowRankPlan& plan) {
  std::map<int, size_t> factored;  // node index -> report layer
  for (size_t k = 0; k < plan.node.size(); ++k)
    if (plan.report.layers[k].rank > 0)
      factored[plan.node[k]] = k;

  auto out = std::make_unique<Model>(model.input_shape());
  out->set_fuse_relu(model.fuse_relu());
  std::vector<std::string> output_name(model.size());
  std::vector<int> new_index(model.size());  // the copied node, or the output factor
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& layer = model.layer(i);
    const std::string& name = model.node_name(i);
    std::vector<std::string> inputs;
    for (int j : model.node_inputs(i))
      inputs.push_back(j == Model::kModelInput ? "input" : output_name[static_cast<size_t>(j)]);
    const auto f = factored.find(static_cast<int>(i));
    if (f == factored.end()) {
      std::unique_ptr<Layer> copy = layer.fresh_copy();
      LATHE_CHECK(copy != nullptr, "low-rank: layer '", name, "' cannot be rebuilt (check_lowrank_model)");
      new_index[i] = out->add(name, std::move(copy), inputs);
      output_name[i] = name;
      continue;
    }
    const int64_t r = plan.report.layers[f->second].rank;
    std::unique_ptr<Layer> first, second;
    if (layer.kind() == "linear") {
      const auto& lin = static_cast<const Linear&>(layer);
      first = std::make_unique<Linear>(lin.in_features(), r, false);
      second = std::make_unique<Linear>(r, lin.out_features(), lin.has_bias());
    } else {
      const auto& conv = static_cast<const Conv2d&>(layer);
      const ConvParams& p = conv.conv_params();
      first = std::make_unique<Conv2d>(conv.in_channels(), r, conv.kernel(), p.stride_h, p.pad_h, false);
      second = std::make_unique<Conv2d>(r, conv.out_channels(), 1, 1, 0, conv.has_bias());
    }
    out->add(name + ".0", std::move(first), inputs);
    new_index[i] = out->add(name + ".1", std::move(second), {name + ".0"});
    output_name[i] = name + ".1";
  }

  Rng unused(0);  // every parameter is overwritten below
  out->create_params(be, model.dtype(), unused);
  out->set_compute_precision(model.compute_precision());
  out->set_low_precision_activations(model.low_precision_activations());

  for (size_t i = 0; i < model.size(); ++i) {
    Layer& from = model.layer(i);
    Layer& to = out->layer(static_cast<size_t>(new_index[i]));
    const auto f = factored.find(static_cast<int>(i));
    if (f == factored.end()) {
      std::vector<Param*> pf = from.params(), pt = to.params();
      std::vector<Buffer*> bf = from.buffers(), bt = to.buffers();
      LATHE_CHECK(pf.size() == pt.size() && bf.size() == bt.size(), "low-rank: copying '", model.node_name(i), "'");
      for (size_t k = 0; k < pf.size(); ++k)
        be.copy(pf[k]->value, pt[k]->value);
      for (size_t k = 0; k < bf.size(); ++k)
        be.copy(bf[k]->value, bt[k]->value);
      continue;
    }
    // W ~ (U_r S_r^1/2) (S_r^1/2 V_r^T): the square root on both sides keeps the factors' scales
    // alike, which fine-tuning with one learning rate prefers.
    const LowRankLayer& l = plan.report.layers[f->second];
    const Svd& svd = plan.svd[f->second];
    const int64_t r = l.rank;
    std::vector<double> a(static_cast<size_t>(l.rows * r)), b(static_cast<size_t>(r * l.cols));
    for (int64_t j = 0; j < r; ++j) {
      const double root = std::sqrt(svd.s[static_cast<size_t>(j)]);
      for (int64_t i2 = 0; i2 < l.rows; ++i2)
        a[static_cast<size_t>(i2 * r + j)] = svd.u_at(i2, j) * root;
      for (int64_t c = 0; c < l.cols; ++c)
        b[static_cast<size_t>(j * l.cols + c)] = svd.v_at(c, j) * root;
    }
    Layer& first = out->layer(static_cast<size_t>(new_index[i] - 1));
    store_values(be, b, param_named(first, "weight").value);
    store_values(be, a, param_named(to, "weight").value);
    if (static_cast<const MatmulLayer&>(from).has_bias())
      be.copy(param_named(from, "bias").value, param_named(to, "bias").value);
  }
  return out;
}

std::unique_ptr<Model> factorize_model(Model& model, Backend& be, const LowRankOptions& options,
                                       LowRankReport* report) {
  const LowRankPlan plan = plan_lowrank(model, be, options);
  if (report)
    *report = plan.report;
  return build_lowrank_model(model, be, plan);
}

}  // namespace lathe
