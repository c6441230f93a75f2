// History commands: every query goes through engine/store's C++ API (the same one the GUI uses).
// `report` goes through widgets/report (Qt) when lathe-cli is built with Qt (LATHE_HAVE_REPORT).
#include "app/cli_history.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "engine/analysis/run_groups.h"
#include "engine/core/error.h"
#include "engine/core/file_write.h"
#include "engine/core/temp_files.h"
#include "engine/run/config.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"

#ifdef LATHE_HAVE_REPORT
#include "widgets/common/offscreen_app.h"
#include "widgets/report/report.h"
#endif

namespace lathe::cli {

Store open_for_reading(const std::string& db) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(db, ec))  // a typo in --db must not create an empty store and list it
    throw DataError("no store at " + db + ": nothing has run with this --db yet (`lathe-cli run` creates it); " +
                    "give --db the store file your runs are in");
  const fs::path dir = fs::absolute(db).parent_path();
  const bool writable = access(db.c_str(), W_OK) == 0 && access(dir.c_str(), W_OK) == 0;
  return writable ? Store::open(db) : Store::open(db, Store::read_only_options());
}

void check_output_file(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw DataError(option + " " + path + ": it is a folder; give a file name");
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec))
    throw DataError(option + " " + path + ": the folder " + folder.string() + " does not exist");
  if (::access(folder.c_str(), W_OK) != 0 && !fs::exists(path, ec))
    throw DataError(option + " " + path + ": the folder " + folder.string() + " is not writable by this user");
}

namespace {

std::string fmt_value(double v) {
  if (std::isnan(v))
    return "-";
  char buf[32];
  // Counts, bytes and rates in full; fractions and losses to 4 significant digits.
  std::snprintf(buf, sizeof(buf), std::fabs(v) >= 1e4 ? "%.0f" : "%.4g", v);
  return buf;
}

std::string fmt_duration(const RunRecord& r) {
  if (!r.started_ms)
    return "-";
  const int64_t end = r.finished_ms ? *r.finished_ms : (r.heartbeat_ms ? *r.heartbeat_ms : *r.started_ms);
  const int64_t s = (end - *r.started_ms) / 1000;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld", static_cast<long>(s / 60), static_cast<long>(s % 60));
  return buf;
}

/// `s` made safe for a terminal: control characters (which could move the cursor or forge table
/// rows) shown as \xNN, and cut to `max` bytes on a UTF-8 boundary with "..." (a 1 MB name stays
/// one cell).
std::string printable(const std::string& s, size_t max = 64) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (out.size() >= max) {
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back();  // a continuation byte: drop the partial character
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0)
        out.pop_back();
      return out + "...";
    }
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

/// The columns `s` (UTF-8) takes on a terminal: one per character, none for a combining mark, two
/// for East Asian wide characters and emoji, so a table with "名前" or "ü" in it stays aligned.
size_t display_width(const std::string& s) {
  size_t width = 0;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += len;
    if ((cp >= 0x300 && cp <= 0x36F) || cp == 0x200D || (cp >= 0xFE00 && cp <= 0xFE0F))
      continue;  // combining marks, zero-width joiner, variation selectors
    const bool wide = (cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0xA4CF) ||
                      (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) ||
                      (cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF60) ||
                      (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
                      (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD);
    width += wide ? 2 : 1;
  }
  return width;
}

/// Prints rows as an aligned text table; every cell goes through printable().
void print_table(std::vector<std::vector<std::string>> rows) {
  for (auto& r : rows)
    for (std::string& cell : r)
      cell = printable(cell);
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i)
        width.push_back(0);
      width[i] = std::max(width[i], display_width(r[i]));
    }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size())
        line += std::string(width[i] - display_width(r[i]) + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

nlohmann::json summary_json(const MetricSummary& m) {
  auto num = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  return {{"count", m.count},           {"last", num(m.last)},
          {"last_step", m.last_step},   {"min", num(m.min)},
          {"min_step", m.min_step},     {"max", num(m.max)},
          {"max_step", m.max_step},     {"best", num(m.best())},
          {"best_step", m.best_step()}, {"direction", m.direction == Direction::minimize ? "min" : "max"}};
}

nlohmann::json run_json(const RunRecord& r) {
  nlohmann::json j{{"id", r.id},
                   {"name", r.name},
                   {"status", std::string(status_name(r.status))},
                   {"created", format_local_time(r.created_ms)},
                   {"host", r.host},
                   {"backend", r.backend},
                   {"devices", r.devices},
                   {"code_version", r.code_version}};
  if (r.started_ms)
    j["started"] = format_local_time(*r.started_ms);
  if (r.finished_ms)
    j["finished"] = format_local_time(*r.finished_ms);
  j["note"] = r.note;
  j["tags"] = r.tags;
  return j;
}

std::string join_tags(const std::vector<std::string>& tags) {
  std::string out;
  for (const std::string& t : tags)
    out += (out.empty() ? "" : ",") + t;
  return out;
}

/// Refuses a --sort that names no column and no metric of this store, listing what is allowed.
void check_sort_key(const Store& store, const std::string& sort) {
  if (sort == "created" || sort == "name" || sort == "status" || sort == "started")
    return;
  std::string metric = sort;
  for (const char* prefix : {"best:", "last:"})
    if (sort.rfind(prefix, 0) == 0)
      metric = sort.substr(5);
  const std::vector<std::string> metrics = store.metric_names();
  if (std::find(metrics.begin(), metrics.end(), metric) != metrics.end())
    return;
  std::string known;
  for (size_t i = 0; i < metrics.size() && i < 12; ++i)
    known += (i ? ", " : "") + metrics[i];
  if (metrics.size() > 12)
    known += ", ... (" + std::to_string(metrics.size()) + " in all)";
  throw ConfigError(
      "--sort " + printable(sort) + ": no metric '" + printable(metric) +
      "' in this store; allowed: created, name, status, started, METRIC, last:METRIC or best:METRIC" +
      (metrics.empty() ? std::string(" (the store has no metrics yet)") : ", where METRIC is one of: " + known));
}

/// ConfigError when no run of `ids` has the flattened config key `key` (`option` is what the user
/// typed before it: "--param ", "--group-by ", "--group-by -"): a typo in --param or --group-by would otherwise select no run, or fold every run
/// into one group, without a word. Names the closest keys those runs have.
void check_config_key(const Store& store, const std::vector<std::string>& ids, const std::string& key,
                      const std::string& option, bool suffix_match = false) {
  std::set<std::string> keys;
  for (const std::string& id : ids)
    for (const auto& kv : store.params(id)) {
      if (kv.first == key || (suffix_match && key_matches(kv.first, key)))
        return;
      keys.insert(kv.first);
    }
  if (keys.empty())
    return;  // no run, or runs without a config: nothing to check against
  const std::vector<std::string> close = typo_matches(key, std::vector<std::string>(keys.begin(), keys.end()), 3);
  std::string text;
  for (const std::string& c : close)
    text += (text.empty() ? "" : ", ") + c;
  throw ConfigError(option + key + ": no config key of that name in " +
                    (ids.size() == 1 ? std::string("the run") : "any of the " + std::to_string(ids.size()) + " runs") +
                    (close.empty() ? "; `lathe-cli show RUN` lists a run's keys" : "; did you mean " + text + "?"));
}

const char* kListMetrics[] = {"test/accuracy", "test/loss", "train/samples_per_s", "model/bytes", "cost/usd"};

int cmd_list(const std::string& db, const std::vector<std::string>& statuses, const std::string& glob,
             const std::vector<std::string>& params, const std::string& sort, int64_t limit, bool json,
             const std::vector<std::string>& tags, const std::string& search, const std::string& sweep) {
  Store store = open_for_reading(db);
  RunQuery q;
  if (!sweep.empty())
    q.sweep = find_sweep(store, sweep).id;  // id, unique prefix or name; refused naming what exists
  q.tags = tags;
  q.search = search;
  for (const std::string& s : statuses)
    q.statuses.push_back(parse_status(s));
  q.name_glob = glob;
  for (const std::string& p : params) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--param expects key.path=value, got '" + p + "'");
    q.params.emplace_back(p.substr(0, eq), p.substr(eq + 1));
  }
  if (!sort.empty() && sort != "created") {
    // "test/accuracy" = by last value, "best:test/accuracy" = by best value, or name/status/started.
    check_sort_key(store, sort);
    if (sort == "name")
      q.sort = RunQuery::Sort::name;
    else if (sort == "status")
      q.sort = RunQuery::Sort::status;
    else if (sort == "started")
      q.sort = RunQuery::Sort::started;
    else if (sort.rfind("best:", 0) == 0) {
      q.sort = RunQuery::Sort::metric_best;
      q.sort_metric = sort.substr(5);
    } else {
      q.sort = RunQuery::Sort::metric_last;
      q.sort_metric = sort.rfind("last:", 0) == 0 ? sort.substr(5) : sort;
    }
  }
  q.limit = limit;
  const RunPage page = store.list_runs(q);
  if (page.total == 0 && !q.params.empty()) {  // say so when a --param key is one no run has
    RunQuery all;
    all.limit = 0;
    std::vector<std::string> ids;
    for (const RunListItem& r : store.list_runs(all).runs)
      ids.push_back(r.run.id);
    for (const auto& kv : q.params)
      check_config_key(store, ids, kv.first, "--param ");
  }
  if (json) {
    nlohmann::json out{{"total", page.total}, {"runs", nlohmann::json::array()}};
    for (const RunListItem& item : page.runs) {
      nlohmann::json r = run_json(item.run);
      for (const MetricSummary& m : item.metrics)
        r["metrics"][m.metric] = summary_json(m);
      out["runs"].push_back(r);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows{{"id", "name", "status", "created", "duration", "backend", "test acc",
                                              "best test acc", "samples/s", "model bytes", "$", "tags", "note"}};
  for (const RunListItem& item : page.runs) {
    auto last = [&](const char* m) {
      const MetricSummary* s = item.metric(m);
      return s ? fmt_value(s->last) : std::string("-");
    };
    const MetricSummary* acc = item.metric("test/accuracy");
    rows.push_back({item.run.id, item.run.name, std::string(status_name(item.run.status)),
                    format_local_time(item.run.created_ms), fmt_duration(item.run), item.run.backend,
                    last("test/accuracy"), acc ? fmt_value(acc->best()) : "-", last("train/samples_per_s"),
                    last("model/bytes"), last("cost/usd"), join_tags(item.run.tags), printable(item.run.note, 40)});
  }
  print_table(rows);
  std::cout << page.runs.size() << " of " << page.total << " run(s) in " << store.path() << "\n";
  for (const RunListItem& item : page.runs)
    if (item.run.status == RunStatus::incomplete)
      std::cout << "run " << item.run.id << " is incomplete (samples missing): `lathe-cli repair " << item.run.id
                << "` re-imports them\n";
  return 0;
}

int cmd_show(const std::string& db, const std::string& ref, bool json) {
  Store store = open_for_reading(db);
  const std::string id = store.resolve_run(ref);
  const RunRecord r = store.run(id);
  const auto summaries = store.summaries(id);
  const auto events = store.events(id);
  const auto artifacts = store.artifacts(id);
  if (json) {
    nlohmann::json out = run_json(r);
    out["config"] = r.config_json.empty() ? nlohmann::json(nullptr) : nlohmann::json::parse(r.config_json);
    for (const MetricSummary& m : summaries)
      out["metrics"][m.metric] = summary_json(m);
    out["events"] = nlohmann::json::array();
    for (const EventRecord& e : events)
      out["events"].push_back({{"at", format_local_time(e.at_ms)}, {"kind", e.kind}, {"fields", e.fields}});
    out["artifacts"] = nlohmann::json::array();
    for (const ArtifactRecord& a : artifacts)
      out["artifacts"].push_back({{"kind", a.kind}, {"path", a.path}, {"bytes", a.bytes}, {"sha256", a.sha256}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "run " << printable(r.id) << "  " << printable(r.name, 200) << "  [" << status_name(r.status) << "]\n"
            << "  created " << format_local_time(r.created_ms) << ", duration " << fmt_duration(r) << ", host "
            << r.host << ", backend " << r.backend << ", lathe " << r.code_version << "\n";
  for (const std::string& d : r.devices)
    std::cout << "  device " << d << "\n";
  if (!r.tags.empty())
    std::cout << "  tags " << printable(join_tags(r.tags), 400) << "\n";
  if (!r.note.empty())
    std::cout << "  note " << printable(r.note, 2000) << "\n";
  if (r.status == RunStatus::incomplete || r.status == RunStatus::interrupted)
    std::cout << "  " << (r.status == RunStatus::incomplete ? "some samples are not in the store" : "interrupted")
              << ": `lathe-cli repair " << r.id << "` re-imports what the run logged to its metrics.jsonl\n";
  std::cout << "\nconfig:\n";
  for (const auto& [k, v] : store.params(id))
    std::cout << "  " << printable(k, 200) << " = " << printable(v, 400) << "\n";
  std::cout << "\nmetrics:\n";
  std::vector<std::vector<std::string>> rows{{"  metric", "last", "min", "max", "best", "best step", "count"}};
  for (const MetricSummary& m : summaries)
    rows.push_back({"  " + m.metric, fmt_value(m.last), fmt_value(m.min), fmt_value(m.max), fmt_value(m.best()),
                    std::to_string(m.best_step()), std::to_string(m.count)});
  print_table(rows);
  std::cout << "\nevents:\n";
  for (const EventRecord& e : events) {
    std::string text = e.fields.dump();
    if (text.size() > 160)
      text = text.substr(0, 157) + "...";
    std::cout << "  " << format_local_time(e.at_ms) << "  " << e.kind << "  " << text << "\n";
  }
  std::cout << "\nartifacts:\n";
  for (const ArtifactRecord& a : artifacts)
    std::cout << "  " << printable(a.kind) << "  " << printable(a.path, 400) << "  " << a.bytes << " bytes  sha256 "
              << a.sha256 << "\n";
  return 0;
}

nlohmann::json spread_json(const Spread& s) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"n", s.n}, {"mean", num(s.mean)}, {"std", num(s.std)}, {"min", num(s.min)}, {"max", num(s.max)}};
}

/// compare --group / --group-by: runs folded into groups, every metric summary as mean ± std (n).
int cmd_compare_groups(const std::string& db, const std::vector<std::string>& refs, const std::string& name_glob,
                       const GroupBy& by, bool json) {
  Store store = open_for_reading(db);
  std::vector<std::string> ids;
  if (refs.empty()) {  // every run of the store (or of --name), oldest first
    RunQuery q;
    q.limit = 0;
    q.name_glob = name_glob;
    q.descending = false;
    for (const RunListItem& r : store.list_runs(q).runs)
      ids.push_back(r.run.id);
  } else {
    for (const std::string& r : refs)
      ids.push_back(store.resolve_run(r));
  }
  if (ids.empty())
    throw DataError("compare --group-by: no runs" +
                    (name_glob.empty() ? std::string(" in ") + db : " named " + name_glob));
  for (const std::string& k : by.keys)
    check_config_key(store, ids, k, "--group-by ");
  if (by.keys.empty())
    for (const std::string& k : by.without)
      check_config_key(store, ids, k, "--group-by -", /*suffix_match=*/true);
  const std::vector<RunGroup> groups = group_runs(store, ids, by);
  if (json) {
    nlohmann::json out{{"group_by", by.describe()},
                       {"std", "sample standard deviation (ddof=1, as numpy.std(x, ddof=1))"}};
    out["groups"] = nlohmann::json::array();
    for (const RunGroup& g : groups) {
      nlohmann::json jg{{"label", g.label}, {"runs", g.run_ids}, {"key", nlohmann::json::object()}};
      for (const auto& [k, v] : g.key)
        jg["key"][k] = v;
      jg["metrics"] = nlohmann::json::object();
      for (const GroupMetric& m : g.metrics)
        jg["metrics"][m.metric] = {{"last", spread_json(m.last)},
                                   {"best", spread_json(m.best)},
                                   {"min", spread_json(m.min)},
                                   {"max", spread_json(m.max)},
                                   {"direction", m.direction == Direction::minimize ? "min" : "max"}};
      out["groups"].push_back(jg);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << groups.size() << " group(s) of " << ids.size() << " runs by " << printable(by.describe(), 200)
            << "; mean \u00b1 std (n), std = sample standard deviation (ddof=1)\n\n";
  std::vector<std::vector<std::string>> rows{{"group", "n", "runs"}};
  for (const RunGroup& g : groups) {
    std::string members;
    for (const std::string& id : g.run_ids)
      members += (members.empty() ? "" : " ") + id;
    rows.push_back({g.label, std::to_string(g.run_ids.size()), members});
  }
  for (auto& r : rows)  // the member list may be long: printable() would cut it at 64
    r[2] = r[2].size() > 60 ? r[2].substr(0, 57) + "..." : r[2];
  print_table(rows);
  std::cout << "\n";
  std::set<std::string> metric_names;
  for (const RunGroup& g : groups)
    for (const GroupMetric& m : g.metrics)
      metric_names.insert(m.metric);
  rows.clear();
  std::vector<std::string> header{"metric"};
  for (const RunGroup& g : groups)
    header.push_back(g.label);
  rows.push_back(header);
  for (const std::string& name : metric_names)
    for (const char* stat : {"last", "best"}) {
      std::vector<std::string> r{name + " (" + stat + ")"};
      for (const RunGroup& g : groups) {
        const GroupMetric* m = g.metric(name);
        r.push_back(m ? format_spread(std::string(stat) == "last" ? m->last : m->best) : "-");
      }
      rows.push_back(r);
    }
  print_table(rows);
  return 0;
}

int cmd_compare(const std::string& db, const std::vector<std::string>& refs, bool diff_only, bool json) {
  if (refs.size() < 2)
    throw ConfigError("compare needs at least two runs (or --group / --group-by, which compare groups of runs)");
  Store store = open_for_reading(db);
  std::vector<std::string> ids;
  for (const std::string& r : refs) {
    const std::string id = store.resolve_run(r);
    if (std::find(ids.begin(), ids.end(), id) != ids.end())
      throw ConfigError("compare: run " + id + " is given twice (\"" + printable(r) +
                        "\" names it again); allowed: two or more different runs");
    ids.push_back(id);
  }
  // Config side by side: every key, or only those that differ.
  std::map<std::string, std::vector<std::string>> config;
  for (size_t i = 0; i < ids.size(); ++i)
    for (const auto& [k, v] : store.params(ids[i])) {
      auto& row = config[k];
      row.resize(ids.size(), "(absent)");
      row[i] = v;
    }
  for (auto& [k, row] : config)
    row.resize(ids.size(), "(absent)");
  std::map<std::string, std::vector<std::optional<MetricSummary>>> metrics;
  for (size_t i = 0; i < ids.size(); ++i)
    for (const MetricSummary& m : store.summaries(ids[i])) {
      auto& row = metrics[m.metric];
      row.resize(ids.size());
      row[i] = m;
    }
  for (auto& [k, row] : metrics)
    row.resize(ids.size());
  auto differs = [](const std::vector<std::string>& row) {
    return std::set<std::string>(row.begin(), row.end()).size() > 1;
  };
  if (json) {
    nlohmann::json out{{"runs", ids}, {"config", nlohmann::json::object()}, {"metrics", nlohmann::json::object()}};
    for (const auto& [k, row] : config)
      if (!diff_only || differs(row))
        out["config"][k] = row;
    for (const auto& [k, row] : metrics) {
      nlohmann::json cells = nlohmann::json::array();
      for (const auto& m : row)
        cells.push_back(m ? summary_json(*m) : nlohmann::json(nullptr));
      out["metrics"][k] = cells;
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header{"config"};
  for (const std::string& id : ids)
    header.push_back(id);
  rows.push_back(header);
  int same = 0;
  for (const auto& [k, row] : config) {
    if (diff_only && !differs(row)) {
      ++same;
      continue;
    }
    std::vector<std::string> r{k};
    r.insert(r.end(), row.begin(), row.end());
    rows.push_back(r);
  }
  print_table(rows);
  if (diff_only)
    std::cout << "(" << same << " identical keys hidden)\n";
  std::cout << "\n";
  rows.clear();
  header[0] = "metric (last / best)";
  rows.push_back(header);
  for (const auto& [k, row] : metrics) {
    std::vector<std::string> r{k};
    for (const auto& m : row)
      r.push_back(m ? fmt_value(m->last) + " / " + fmt_value(m->best()) : "-");
    rows.push_back(r);
  }
  print_table(rows);
  return 0;
}

int cmd_export(const std::string& db, const std::vector<std::string>& refs, const std::string& format,
               const std::string& out_path) {
  const bool to_stdout = out_path.empty() || out_path == "-";
  if (!to_stdout)
    check_output_file(out_path, "-o");
  Store store = open_for_reading(db);
  std::vector<std::string> ids;
  for (const std::string& ref : refs)
    ids.push_back(store.resolve_run(ref));
  // Every write is checked (engine/core/file_write.h): a full disk fails the export with the file
  // named. A file is written beside the target and renamed over it at the end, so a failed or
  // interrupted (Ctrl-C) export never leaves a short file looking like success, nor destroys the
  // file it was to replace; a device or pipe (-o /dev/stdout) is written directly.
  struct stat st {};
  const std::filesystem::path target(out_path);
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  const bool direct = !to_stdout && ((::stat(out_path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) ||
                                     ::access(folder.c_str(), W_OK) != 0);  // a writable file in a locked folder
  std::string tmp;
  if (!to_stdout && !direct)
    tmp = (folder / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()))).string();
  const TempFileGuard on_signal(tmp);
  std::unique_ptr<FileWriter> file;
  std::string buffer;  // stdout: written out in 64 KiB pieces, every write checked
  const auto put = [&](const std::string& text) {
    if (file) {
      file->write(text);
      return;
    }
    buffer += text;
    if (buffer.size() >= 64 * 1024) {
      write_all(STDOUT_FILENO, buffer, "stdout");
      buffer.clear();
    }
  };
  int64_t n = 0;
  try {
    if (!to_stdout)
      file = std::make_unique<FileWriter>(direct ? out_path : tmp, FileWriter::Mode::truncate, out_path);
    if (format == "csv")
      put("run,metric,step,wall_ms,value\n");
    char line[512];
    for (const std::string& id : ids) {
      store.for_each_sample(id, [&](const std::string& metric, const Point& p) {
        if (format == "csv") {
          std::snprintf(line, sizeof(line), ",%lld,%.3f,%.17g\n", static_cast<long long>(p.step), p.wall_ms, p.value);
          put(id + "," + metric + line);
        } else {
          nlohmann::json j{{"run", id}, {"metric", metric}, {"step", p.step}, {"wall_ms", p.wall_ms}};
          j["value"] = std::isnan(p.value) ? nlohmann::json(nullptr) : nlohmann::json(p.value);
          put(j.dump() + "\n");
        }
        ++n;
      });
    }
    if (file)
      file->close(/*fsync=*/!direct);
    else
      write_all(STDOUT_FILENO, buffer, "stdout");
    if (!tmp.empty() && std::rename(tmp.c_str(), out_path.c_str()) != 0)
      throw DataError("-o " + out_path + ": " + std::strerror(errno));
  } catch (...) {
    file.reset();
    if (!tmp.empty())
      ::unlink(tmp.c_str());  // the target, if it was there, is untouched
    throw;
  }
  if (!to_stdout)
    std::fprintf(stderr, "lathe-cli: exported %lld samples to %s\n", static_cast<long long>(n), out_path.c_str());
  return 0;
}

/// The report format: --format when given, else the output file's extension.
std::string report_format_text(const std::string& format, const std::string& out_path) {
  if (!format.empty())
    return format;
  const auto dot = out_path.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : out_path.substr(dot + 1);
  if (ext == "html" || ext == "htm")
    return "html";
  if (ext == "pdf" || ext == "csv")
    return ext;
  throw ConfigError("--format: not given and '" + out_path +
                    "' has no .html, .pdf or .csv extension; allowed: html, pdf, csv");
}

int cmd_report(const std::string& db, const std::vector<std::string>& refs, const std::string& format_arg,
               const std::string& out_path, const std::optional<GroupBy>& group_by) {
#ifndef LATHE_HAVE_REPORT
  (void)db, (void)refs, (void)format_arg, (void)out_path, (void)group_by;
  throw Error(
      "lathe-cli report needs the Qt build: this lathe-cli was built without Qt 6 and QCustomPlot. Install them "
      "(qt6-base-dev libqcustomplot-dev; scripts/install-deps.sh does) and rebuild; `lathe-cli export --format csv` "
      "writes every sample without Qt.");
#else
  const report::Format format = report::parse_format(report_format_text(format_arg, out_path));
  Store store = open_for_reading(db);
  // Charts are drawn off screen: no display is needed or used (unless QT_QPA_PLATFORM says otherwise).
  if (format != report::Format::csv)
    widgets::offscreen_application("lathe-cli");
  report::write_report(store, refs, format, out_path, group_by ? &*group_by : nullptr);
  std::fprintf(stderr, "lathe-cli: wrote the %s report of %zu run(s) to %s\n", report::format_name(format).c_str(),
               refs.size(), out_path.c_str());
  return 0;
#endif
}

int cmd_delete(const std::string& db, const std::vector<std::string>& refs, bool yes) {
  Store store = Store::open(db);
  std::vector<std::string> ids;
  for (const std::string& r : refs)
    ids.push_back(store.resolve_run(r));
  if (!yes) {
    if (!isatty(STDIN_FILENO))
      throw ConfigError("delete asks for confirmation: pass --yes when not on a terminal");
    std::cerr << "delete " << ids.size() << " run(s) and their artifact files? [y/N] ";
    std::string answer;
    std::getline(std::cin, answer);
    if (answer != "y" && answer != "Y" && answer != "yes") {
      std::cerr << "nothing deleted\n";
      return 1;
    }
  }
  int status = 0;
  for (const std::string& id : ids) {
    const DeleteResult r = store.delete_run(id, true);
    std::cout << "deleted " << id << ": " << r.samples << " samples, " << r.files_deleted.size() << " file(s)";
    if (r.folder_removed)
      std::cout << " and the folder " << r.folder;
    std::cout << "\n";
    if (!r.files_missing.empty())
      std::cout << "  " << r.files_missing.size() << " recorded file(s) were already gone\n";
    // Files kept because they could not be proven the run's: the user has to look at them.
    for (const std::string& f : r.files_failed) {
      std::cerr << "lathe-cli delete: " << f << "\n";
      status = 1;
    }
  }
  return status;
}

}  // namespace

void add_history_commands(CLI::App& app, const std::string& db_path, int& exit_code) {
  struct ListArgs {
    std::vector<std::string> statuses, params, tags;
    std::string glob, sort, search, sweep;
    int64_t limit = 50;
    bool json = false;
  };
  auto list_args = std::make_shared<ListArgs>();
  CLI::App* list = app.add_subcommand("list", "List runs in the store (newest first)");
  list->add_option("--status", list_args->statuses, "Only runs with this status (repeatable)");
  list->add_option("--name", list_args->glob, "Only runs whose name matches this glob");
  list->add_option("--param", list_args->params, "Only runs whose config has key.path=value (repeatable)");
  list->add_option("--sort", list_args->sort,
                   "created (default), started, name, status, METRIC (its last value) or best:METRIC");
  list->add_option("--limit", list_args->limit, "At most this many rows (0: all)");
  list->add_flag("--json", list_args->json, "JSON instead of a table");
  list->add_option("--tag", list_args->tags, "Only runs with this tag (repeatable: every one)");
  list->add_option("--search", list_args->search, "Only runs whose id, name, note or a tag contains this text");
  list->add_option("--sweep", list_args->sweep, "Only the runs of this sweep (id, unique id prefix or name)");
  list->callback([&, list_args] {
    exit_code = cmd_list(db_path, list_args->statuses, list_args->glob, list_args->params, list_args->sort,
                         list_args->limit, list_args->json, list_args->tags, list_args->search, list_args->sweep);
  });

  auto show_ref = std::make_shared<std::string>();
  auto show_json = std::make_shared<bool>(false);
  CLI::App* show = app.add_subcommand("show", "Config, metric summaries, events and artifacts of one run");
  show->add_option("run", *show_ref, "Run id, unique id prefix or name")->required();
  show->add_flag("--json", *show_json, "JSON output");
  show->callback([&, show_ref, show_json] { exit_code = cmd_show(db_path, *show_ref, *show_json); });

  struct CompareArgs {
    std::vector<std::string> refs;
    bool diff = false, json = false, group = false;
    std::string group_by, name;
  };
  auto cmp = std::make_shared<CompareArgs>();
  CLI::App* compare = app.add_subcommand(
      "compare", "Configs side by side and metric summaries of several runs, or of groups of runs (--group)");
  compare->add_option("runs", cmp->refs, "Two or more runs (with --group/--group-by: any number; none: every run)");
  compare->add_flag("--diff-only", cmp->diff, "Show only the config keys that differ");
  compare->add_flag("--json", cmp->json, "JSON output");
  compare->add_flag(
      "--group", cmp->group,
      "Group the runs by their config without seed (and name): each metric as mean \u00b1 sample std (n)");
  compare->add_option("--group-by", cmp->group_by,
                      "Group by these config keys (prune.ratio,quant.mode), or by the config without keys given "
                      "as -key (-seed,-train.lr)");
  compare->add_option("--name", cmp->name,
                      "With --group/--group-by and no runs: only runs whose name matches this glob");
  compare->callback([&, cmp, compare] {
    if (cmp->group || compare->count("--group-by") > 0)
      exit_code = cmd_compare_groups(db_path, cmp->refs, cmp->name, GroupBy::parse(cmp->group_by), cmp->json);
    else
      exit_code = cmd_compare(db_path, cmp->refs, cmp->diff, cmp->json);
  });

  auto exp_refs = std::make_shared<std::vector<std::string>>();
  auto exp_format = std::make_shared<std::string>("csv");
  auto exp_out = std::make_shared<std::string>();
  CLI::App* exp = app.add_subcommand("export", "Every sample of runs (never downsampled) as CSV or JSON lines");
  exp->add_option("runs", *exp_refs, "Runs to export")->required();
  exp->add_option("--format", *exp_format, "csv or json")->check(CLI::IsMember({"csv", "json"}));
  exp->add_option("-o,--output", *exp_out, "File to write (default: stdout)");
  exp->callback(
      [&, exp_refs, exp_format, exp_out] { exit_code = cmd_export(db_path, *exp_refs, *exp_format, *exp_out); });

  auto rep_refs = std::make_shared<std::vector<std::string>>();
  auto rep_format = std::make_shared<std::string>();
  auto rep_out = std::make_shared<std::string>();
  auto rep_group = std::make_shared<bool>(false);
  auto rep_group_by = std::make_shared<std::string>();
  CLI::App* rep = app.add_subcommand(
      "report", "A report of one run, or a comparison of several: HTML (charts embedded), PDF or CSV of all samples");
  rep->add_option("runs", *rep_refs, "Run ids, unique id prefixes or names (2+ runs: a comparison)")->required();
  rep->add_option("--format", *rep_format, "html, pdf or csv (default: from the -o file's extension)");
  rep->add_option("-o,--output", *rep_out, "The file to write")->required();
  rep->add_flag("--group", *rep_group, "Also fold the runs into groups by their config without seed (mean \u00b1 std)");
  rep->add_option("--group-by", *rep_group_by,
                  "Fold the runs into groups by these config keys (or -key: without them)");
  rep->callback([&, rep, rep_refs, rep_format, rep_out, rep_group, rep_group_by] {
    std::optional<GroupBy> by;
    if (*rep_group || rep->count("--group-by") > 0)
      by = GroupBy::parse(*rep_group_by);
    exit_code = cmd_report(db_path, *rep_refs, *rep_format, *rep_out, by);
  });

  auto del_refs = std::make_shared<std::vector<std::string>>();
  auto del_yes = std::make_shared<bool>(false);
  CLI::App* del = app.add_subcommand("delete", "Delete runs with their samples and artifact files");
  del->add_option("runs", *del_refs, "Runs to delete")->required();
  del->add_flag("-y,--yes", *del_yes, "Do not ask for confirmation");
  del->callback([&, del_refs, del_yes] { exit_code = cmd_delete(db_path, *del_refs, *del_yes); });
}

}  // namespace lathe::cli
