// Structured pruning: option checks, channel scores, the choice of kept channels (per layer or
// global), and the entry point that plans, builds the smaller model and reports what changed.
#include "engine/compress/prune/structured.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace lathe {

void validate_structured_options(const StructuredOptions& o) {
  if (!(o.ratio >= 0 && o.ratio < 1)) {
    std::ostringstream os;
    os << "prune.ratio: " << o.ratio
       << " is out of range for structured pruning; allowed: a number from 0 up to (not including) 1, the fraction "
          "of filters/neurons removed";
    throw ConfigError(os.str());
  }
  if (o.min_channels < 1)
    throw ConfigError("structured pruning: min_channels must be at least 1, got " + std::to_string(o.min_channels));
}

std::vector<double> channel_norms(Model& model, Backend& backend, int node, StructuredNorm norm) {
  Layer& layer = model.layer(node);
  LATHE_CHECK(is_structured_prunable_kind(layer.kind()), "channel_norms: layer '", model.node_name(node), "' is a ",
              layer.kind());
  const Tensor& w = layer.params().at(0)->value;  // "weight": [out, in] or [out, in, kh, kw]
  Tensor host = Tensor::empty(w.shape(), w.dtype());
  backend.copy(w, host);
  const int64_t rows = w.dim(0), row_len = w.numel() / rows;
  std::vector<double> out(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t k = 0; k < row_len; ++k) {
      const double v = host.at_flat(r * row_len + k);
      acc += norm == StructuredNorm::l1 ? std::fabs(v) : v * v;
    }
    out[r] = norm == StructuredNorm::l1 ? acc : std::sqrt(acc);
  }
  return out;
}

namespace {

/// Shared, normalised score of each channel of a group: mean over producers of norm / producer's mean norm.
std::vector<double> group_scores(Model& model, Backend& backend, const ChannelGroup& g, StructuredNorm norm) {
  std::vector<double> score(g.channels, 0.0);
  for (int p : g.producers) {
    const std::vector<double> n = channel_norms(model, backend, p, norm);
    LATHE_CHECK(static_cast<int64_t>(n.size()) == g.channels, "structured pruning: producer '", model.node_name(p),
                "' has ", n.size(), " channels, its group ", g.channels);
    const double mean = std::accumulate(n.begin(), n.end(), 0.0) / static_cast<double>(n.size());
    for (int64_t c = 0; c < g.channels; ++c)
      score[c] += mean > 0 ? n[c] / mean : 0.0;
  }
  for (double& s : score)
    s /= static_cast<double>(g.producers.size());
  return score;
}

std::vector<int64_t> all_channels(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

int64_t rounded_count(double ratio, int64_t n) { return static_cast<int64_t>(std::llround(ratio * n)); }

}  // namespace

StructuredPlan plan_structured(Model& model, Backend& backend, const StructuredOptions& options) {
  validate_structured_options(options);
  StructuredPlan plan;
  plan.graph = analyse_channels(model, options.exclude);
  const std::vector<ChannelGroup>& groups = plan.graph.groups;
  plan.kept.resize(groups.size());

  // Scores of the prunable groups; a removal flag per channel.
  std::vector<std::vector<double>> scores(groups.size());
  std::vector<std::vector<char>> removed(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    removed[g].assign(groups[g].channels, 0);
    if (groups[g].prunable)
      scores[g] = group_scores(model, backend, groups[g], options.norm);
  }

  struct Candidate {
    double score;
    size_t group;
    int64_t channel;
  };
  auto lowest_first = [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score)
      return a.score < b.score;
    return a.group != b.group ? a.group < b.group : a.channel < b.channel;
  };

  if (options.scope == StructuredScope::layer) {
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!groups[g].prunable)
        continue;
      const int64_t c = groups[g].channels;
      const int64_t drop = std::min(rounded_count(options.ratio, c), std::max<int64_t>(0, c - options.min_channels));
      std::vector<Candidate> cand;
      for (int64_t ch = 0; ch < c; ++ch)
        cand.push_back({scores[g][ch], g, ch});
      std::sort(cand.begin(), cand.end(), lowest_first);
      for (int64_t k = 0; k < drop; ++k)
        removed[g][cand[k].channel] = 1;
    }
  } else {
    std::vector<Candidate> cand;
    int64_t total = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      if (!groups[g].prunable)
        continue;
      total += groups[g].channels;
      for (int64_t ch = 0; ch < groups[g].channels; ++ch)
        cand.push_back({scores[g][ch], g, ch});
    }
    std::sort(cand.begin(), cand.end(), lowest_first);
    const int64_t drop = rounded_count(options.ratio, total);
    std::vector<int64_t> left(groups.size());
    for (size_t g = 0; g < groups.size(); ++g)
      left[g] = groups[g].channels;
    int64_t dropped = 0;
    for (const Candidate& c : cand) {
      if (dropped == drop)
        break;
      if (left[c.group] <= options.min_channels)
        continue;  // the layer would vanish: keep its best channels
      removed[c.group][c.channel] = 1;
      --left[c.group];
      ++dropped;
    }
  }

  for (size_t g = 0; g < groups.size(); ++g) {
    if (!groups[g].prunable) {
      plan.kept[g] = all_channels(groups[g].channels);
      continue;
    }
    for (int64_t ch = 0; ch < groups[g].channels; ++ch)
      if (!removed[g][ch])
        plan.kept[g].push_back(ch);
  }
  return plan;
}

std::unique_ptr<Model> prune_structured(Model& model, Backend& backend, const StructuredOptions& options,
                                        StructuredReport* report) {
  const StructuredPlan plan = plan_structured(model, backend, options);
  std::unique_ptr<Model> pruned = build_pruned_model(model, backend, plan);
  if (report) {
    *report = StructuredReport{};
    for (size_t i = 0; i < model.size(); ++i) {
      if (!is_structured_prunable_kind(model.layer(i).kind()))
        continue;
      const int g = plan.graph.output_group[i];
      const ChannelGroup& grp = plan.graph.groups[g];
      report->layers.push_back({model.node_name(i), model.layer(i).kind(), grp.channels,
                                static_cast<int64_t>(plan.kept[g].size()), grp.reason});
    }
    report->params_before = model.param_count();
    report->params_after = pruned->param_count();
    report->flops_before = model.flops_per_sample();
    report->flops_after = pruned->flops_per_sample();
  }
  return pruned;
}

}  // namespace lathe
