// Magnitude and N:M mask selection, and applying masks to weights, gradients and optimizer state.
// Selection sorts with a total order (|w|, layer, index), so the same weights always give the same mask.
#include "engine/compress/prune/mask.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"

namespace lathe {

namespace {

void check_host(const Tensor& t, const std::string& name) {
  LATHE_CHECK(t.device().is_cpu(), "pruning: ", name,
              " is not a host tensor; this increment handles host tensors only");
}

/// p[i] = 0 where keep[i] is 0: the f32 row-major case of mask_tensor, which runs on every weight,
/// gradient and momentum buffer at every fine-tuning step (element by element through
/// Tensor::set_flat it made the mlp's masked fine-tuning 8x slower than its training). A select, not
/// a branch, so it vectorises; +0.0 as set_flat stores.
void zero_pruned(float* p, const uint8_t* keep, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = keep[i] ? p[i] : 0.0f;
}

/// Elements equal to zero (+0.0 or -0.0; NaN is not). The prune stage logs the sparsity at every
/// logging point of its fine-tuning, over every prunable weight: an f32 dense tensor takes one
/// vectorised pass rather than Tensor::at_flat per element.
int64_t count_zeros(const Tensor& t) {
  const int64_t n = t.numel();
  int64_t zeros = 0;
  if (t.device().is_cpu() && t.dtype() == DType::f32 && t.is_dense()) {
    const float* p = static_cast<const float*>(t.raw());
    for (int64_t i = 0; i < n; ++i)
      zeros += p[i] == 0.0f;
    return zeros;
  }
  for (int64_t i = 0; i < n; ++i)
    zeros += t.at_flat(i) == 0.0;
  return zeros;
}

/// |w| of every element in logical order, as double (Tensor::at_flat's value).
std::vector<double> abs_values(const Tensor& w) {
  std::vector<double> out(static_cast<size_t>(w.numel()));
  if (w.device().is_cpu() && w.dtype() == DType::f32 && w.is_contiguous()) {
    const float* p = w.data<float>();
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = std::fabs(static_cast<double>(p[i]));
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = std::fabs(w.at_flat(static_cast<int64_t>(i)));
  return out;
}

/// The prunable weights minus the excluded ones; throws when an exclusion matches nothing.
std::vector<NamedParam> selected_weights(Model& model, const std::vector<std::string>& exclude) {
  std::vector<NamedParam> all = prunable_weights(model);
  std::set<std::string> matched;
  std::vector<NamedParam> out;
  for (const NamedParam& np : all) {
    const std::string layer = np.name.substr(0, np.name.rfind('.'));
    bool skip = false;
    for (const std::string& e : exclude)
      if (e == layer || e == np.name) {
        skip = true;
        matched.insert(e);
      }
    if (!skip)
      out.push_back(np);
  }
  for (const std::string& e : exclude)
    if (!matched.count(e)) {
      std::string names;
      for (const NamedParam& np : all)
        names += (names.empty() ? "" : ", ") + np.name;
      throw ConfigError("prune.exclude: '" + e + "' names no prunable layer; allowed: a layer name or one of " + names);
    }
  return out;
}

PruneMask full_mask(const NamedParam& np) {
  check_host(np.param->value, np.name);
  PruneMask m{np.name, Tensor::empty(np.param->value.shape(), DType::u8)};
  m.keep.fill(1);
  return m;
}

struct Entry {
  double mag;
  int32_t layer;
  int64_t index;
  bool operator<(const Entry& o) const {
    if (mag != o.mag)
      return mag < o.mag;
    if (layer != o.layer)
      return layer < o.layer;
    return index < o.index;
  }
};

/// Prunes the `k` smallest entries of `entries` (a total order, so the choice is deterministic).
void prune_smallest(std::vector<Entry>& entries, int64_t k, std::vector<PruneMask>& masks) {
  if (k <= 0)
    return;
  if (k < static_cast<int64_t>(entries.size()))
    std::nth_element(entries.begin(), entries.begin() + (k - 1), entries.end());
  for (int64_t i = 0; i < k; ++i)
    masks[entries[i].layer].keep.data<uint8_t>()[entries[i].index] = 0;
}

int64_t pruned_count(double sparsity, int64_t n) { return std::llround(sparsity * static_cast<double>(n)); }

}  // namespace

std::vector<NamedParam> prunable_weights(Model& model) {
  std::vector<NamedParam> out;
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& l = model.layer(i);
    if (!dynamic_cast<Linear*>(&l) && !dynamic_cast<Conv2d*>(&l))
      continue;
    for (Param* p : l.params())
      if (p->name == "weight")
        out.push_back({model.node_name(i) + ".weight", p});
  }
  return out;
}

std::vector<PruneMask> magnitude_masks(Model& model, double sparsity, bool global,
                                       const std::vector<std::string>& exclude) {
  if (!(sparsity >= 0.0 && sparsity <= 1.0))
    throw ConfigError("prune.sparsity: " + std::to_string(sparsity) + " is outside the allowed range [0, 1]");
  const std::vector<NamedParam> weights = selected_weights(model, exclude);
  std::vector<PruneMask> masks;
  for (const NamedParam& np : weights)
    masks.push_back(full_mask(np));
  std::vector<Entry> entries;
  for (size_t l = 0; l < weights.size(); ++l) {
    const Tensor& w = weights[l].param->value;
    if (!global)
      entries.clear();
    const std::vector<double> mag = abs_values(w);  // AGP recomputes the masks every few steps
    for (int64_t i = 0; i < w.numel(); ++i)
      entries.push_back({mag[static_cast<size_t>(i)], static_cast<int32_t>(l), i});
    if (!global)
      prune_smallest(entries, pruned_count(sparsity, w.numel()), masks);
  }
  if (global)
    prune_smallest(entries, pruned_count(sparsity, static_cast<int64_t>(entries.size())), masks);
  return masks;
}

std::vector<PruneMask> nm_masks(Model& model, int n, int m, const std::vector<std::string>& exclude) {
  if (m <= 0 || n <= 0 || n > m)
    throw ConfigError("prune.nm: " + std::to_string(n) + ":" + std::to_string(m) +
                      " is not allowed; need 0 < n <= m (e.g. 2:4)");
  std::vector<PruneMask> masks;
  for (const NamedParam& np : selected_weights(model, exclude)) {
    const Tensor& w = np.param->value;
    // Shape as [outer, G, inner]: groups run along G (K for Linear, C for Conv2d) with stride `inner`.
    const int64_t outer = w.dim(0), g = w.dim(1), inner = w.numel() / (outer * g);
    if (g % m != 0)
      throw ConfigError("prune.nm: layer '" + np.name + "' " + shape_str(w.shape()) + " has input dimension " +
                        std::to_string(g) + ", not a multiple of m = " + std::to_string(m) +
                        "; exclude it or choose another m");
    PruneMask mask = full_mask(np);
    uint8_t* keep = mask.keep.data<uint8_t>();
    std::vector<std::pair<double, int64_t>> group(m);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in)
        for (int64_t g0 = 0; g0 < g; g0 += m) {
          for (int j = 0; j < m; ++j) {
            const int64_t idx = (o * g + g0 + j) * inner + in;
            group[j] = {std::fabs(w.at_flat(idx)), idx};
          }
          std::sort(group.begin(), group.end());  // smallest first, then by index
          for (int j = 0; j < m - n; ++j)
            keep[group[j].second] = 0;
        }
    masks.push_back(std::move(mask));
  }
  return masks;
}

void mask_tensor(Tensor& t, const PruneMask& mask) {
  LATHE_CHECK(t.shape() == mask.keep.shape(), "pruning: mask for ", mask.param, " is ", shape_str(mask.keep.shape()),
              ", tensor is ", shape_str(t.shape()));
  check_host(t, mask.param);
  const uint8_t* keep = mask.keep.data<uint8_t>();
  if (t.dtype() == DType::f32 && t.is_contiguous() && mask.keep.is_contiguous()) {
    zero_pruned(t.data<float>(), keep, t.numel());
    return;
  }
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!keep[i])
      t.set_flat(i, 0.0);
}

void mask_tensor_slice(Tensor& t, const PruneMask& mask, int64_t offset) {
  LATHE_CHECK(t.ndim() == 1 && offset >= 0 && offset + t.numel() <= mask.keep.numel() && mask.keep.is_contiguous(),
              "pruning: a slice of ", t.numel(), " elements at ", offset, " is not inside the mask for ", mask.param,
              " (", shape_str(mask.keep.shape()), ")");
  check_host(t, mask.param);
  const uint8_t* keep = mask.keep.data<uint8_t>() + offset;
  if (t.dtype() == DType::f32 && t.is_contiguous()) {
    zero_pruned(t.data<float>(), keep, t.numel());
    return;
  }
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!keep[i])
      t.set_flat(i, 0.0);
}

namespace {
Param& find_param(Model& model, const std::string& name) {
  for (const NamedParam& np : model.named_params())
    if (np.name == name)
      return *np.param;
  LATHE_FAIL("pruning: the model has no parameter '", name, "'");
}
}  // namespace

void apply_masks(Model& model, const std::vector<PruneMask>& masks) {
  for (const PruneMask& m : masks)
    mask_tensor(find_param(model, m.param).value, m);
}

void mask_gradients(Model& model, const std::vector<PruneMask>& masks) {
  for (const PruneMask& m : masks)
    mask_tensor(find_param(model, m.param).grad, m);
}

void mask_state(const std::vector<PruneMask>& masks, const std::function<Tensor*(const std::string&)>& find) {
  for (const PruneMask& m : masks)
    if (Tensor* t = find(m.param); t && t->defined())
      mask_tensor(*t, m);
}

double sparsity(const Tensor& t) {
  const int64_t n = t.numel();
  if (n == 0)
    return 0.0;
  return static_cast<double>(count_zeros(t)) / n;
}

SparsityReport sparsity_report(Model& model) {
  SparsityReport r;
  for (const NamedParam& np : prunable_weights(model)) {
    check_host(np.param->value, np.name);
    ParamSparsity p{np.name, 0, np.param->value.numel()};
    p.zeros = count_zeros(np.param->value);
    r.zeros += p.zeros;
    r.total += p.total;
    r.params.push_back(std::move(p));
  }
  return r;
}

}  // namespace lathe
