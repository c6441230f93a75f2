// lathe-cli importance (see cli_importance.h): a table of knobs, most important first, with the
// forest's permutation importance as a bar and its share, and Spearman's rho for numeric knobs.
#include "app/cli_importance.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/cli_history.h"
#include "engine/analysis/importance.h"
#include "engine/core/error.h"

namespace lathe::cli {

namespace {

struct Args {
  std::string metric, stat = "last", name;
  std::vector<std::string> refs, tags, knobs;
  bool json = false;
};

int cmd_importance(const std::string& db, const Args& a) {
  Store store = open_for_reading(db);
  std::vector<std::string> ids;
  if (a.refs.empty()) {
    RunQuery q;
    q.limit = 0;
    q.name_glob = a.name;
    q.tags = a.tags;
    for (const RunListItem& r : store.list_runs(q).runs)
      ids.push_back(r.run.id);
  } else {
    for (const std::string& r : a.refs)
      ids.push_back(store.resolve_run(r));
  }
  ImportanceOptions o;
  o.metric = a.metric;
  o.stat = a.stat;
  o.knobs = a.knobs;
  const ImportanceResult r = knob_importance(read_run_facts(store, ids), o);
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  if (a.json) {
    nlohmann::json out{{"metric", r.metric}, {"stat", r.stat}, {"runs", r.runs}, {"r2_train", r.r2_train}};
    out["knobs"] = nlohmann::json::array();
    for (const KnobImportance& k : r.knobs)
      out["knobs"].push_back({{"knob", k.knob},
                              {"numeric", k.numeric},
                              {"levels", k.levels},
                              {"spearman", num(k.spearman)},
                              {"permutation", k.permutation},
                              {"share", k.share}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf(
      "What matters for %s (%s value) over %lld runs. Permutation importance of a random forest (%d trees)"
      " fit to every knob at once (R^2 on these runs %.3f), and Spearman's rank correlation of each numeric "
      "knob with the metric.\n\n",
      r.metric.c_str(), r.stat.c_str(), static_cast<long long>(r.runs), ForestOptions{}.trees, r.r2_train);
  size_t width = 4;
  for (const KnobImportance& k : r.knobs)
    width = std::max(width, k.knob.size());
  std::printf("%-*s  %-20s  %6s  %9s  %s\n", static_cast<int>(width), "knob", "importance", "share", "spearman",
              "values");
  for (const KnobImportance& k : r.knobs) {
    const std::string bar(static_cast<size_t>(std::lround(20 * k.share)), '#');
    char rho[16] = "-";
    if (std::isfinite(k.spearman))
      std::snprintf(rho, sizeof(rho), "%+.3f", k.spearman);
    std::printf("%-*s  %-20s  %5.1f%%  %9s  %lld%s\n", static_cast<int>(width), k.knob.c_str(), bar.c_str(),
                100 * k.share, rho, static_cast<long long>(k.levels), k.numeric ? "" : " (categorical)");
  }
  return 0;
}

}  // namespace

void add_importance_command(CLI::App& app, const std::string& db_path, int& exit_code) {
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("importance", "Which knobs matter for a metric over a set of runs");
  c->add_option("--metric", a->metric, "The metric (test/accuracy, train/samples_per_s, model/bytes, cost/usd...)")
      ->required();
  c->add_option("runs", a->refs, "Runs to weigh (default: every run of the store, or of --name / --tag)");
  c->add_option("--name", a->name, "Only runs whose name matches this glob");
  c->add_option("--tag", a->tags, "Only runs with this tag (repeatable)");
  c->add_option("--knob", a->knobs, "Only these config keys (repeatable; default: every key that varies)");
  c->add_option("--stat", a->stat, "last (default) or best value of each run");
  c->add_flag("--json", a->json, "JSON output");
  c->callback([&, a] { exit_code = cmd_importance(db_path, *a); });
}

}  // namespace lathe::cli
