// Sweep expansion and validator-message splitting (see sweep.h).
#include "widgets/ui/sweep.h"

#include <set>
#include <sstream>

#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"
#include "engine/run/sweep_definition.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"

namespace lathe::ui {

std::vector<std::string> split_values(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

std::vector<std::vector<std::string>> expand_sweep(const std::vector<SweepAxis>& axes) {
  std::vector<std::vector<std::string>> runs{{}};
  for (const SweepAxis& axis : axes) {
    if (axis.knob.empty())
      continue;
    if (!find_field(axis.knob))
      throw ConfigError("sweep knob: \"" + axis.knob +
                        "\" is not a config field; allowed: a path from `lathe-cli schema`");
    if (axis.values.empty())
      throw ConfigError("sweep values for " + axis.knob +
                        ": none given; allowed: one or more values separated by commas");
    std::vector<std::vector<std::string>> next;
    for (const auto& prefix : runs)
      for (const std::string& v : axis.values) {
        auto sets = prefix;
        sets.push_back(axis.knob + "=" + v);
        next.push_back(std::move(sets));
      }
    runs = std::move(next);
  }
  if (runs.size() == 1 && runs[0].empty())
    return {};
  return runs;
}

namespace {
std::string leaf(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}
}  // namespace

std::string sweep_run_name(const std::string& base, const std::vector<std::string>& sets) {
  return sweep_member_name(base, sets);
}

std::vector<SweepRun> plan_sweep(const nlohmann::json& base, const std::vector<SweepAxis>& axes) {
  std::vector<SweepRun> out;
  const std::string base_name = base.is_object() ? base.value("name", std::string("experiment")) : "experiment";
  for (auto& sets : expand_sweep(axes)) {
    SweepRun run;
    run.name = sweep_run_name(base_name, sets);
    run.config = base;
    run.config["name"] = run.name;
    run.sets = std::move(sets);
    out.push_back(std::move(run));
  }
  return out;
}

std::string store_sweep(const std::string& db_path, const nlohmann::json& base, const std::vector<SweepAxis>& axes,
                        std::vector<SweepRun>& runs) {
  nlohmann::json grid = nlohmann::json::object();
  for (const SweepAxis& axis : axes)
    if (!axis.knob.empty())
      grid[axis.knob] = axis.values;
  std::vector<NewSweepMember> members;
  for (const SweepRun& run : runs) {
    nlohmann::json config = run.config;
    for (const std::string& s : run.sets)
      apply_override(config, s);
    members.push_back({run.name, config});
  }
  Store store = Store::open(db_path);
  const std::string name = base.is_object() ? base.value("name", std::string("sweep")) : "sweep";
  const std::string id =
      create_sweep(store, name, {{"definition", {{"config", base}, {"grid", grid}}}, {"set", nlohmann::json::array()},
                                 {"base_config", base}},
                   members);
  std::set<std::string> taken;
  for (size_t i = 0; i < runs.size(); ++i) {
    do
      runs[i].run_id = new_run_id(store);
    while (!taken.insert(runs[i].run_id).second);
    set_sweep_member(store, id, static_cast<int>(i), runs[i].run_id, MemberState::running);
  }
  set_sweep_status(store, id, "running");
  return id;
}

nlohmann::json sweep_definition(const nlohmann::json& base, const std::vector<SweepAxis>& axes) {
  expand_sweep(axes);  // the same refusals as a queued sweep
  nlohmann::json grid = nlohmann::json::object();
  for (const SweepAxis& axis : axes)
    if (!axis.knob.empty())
      grid[axis.knob] = axis.values;
  const std::string name = base.is_object() ? base.value("name", std::string("sweep")) : "sweep";
  return {{"name", name}, {"config", base}, {"grid", grid}};
}

std::vector<std::string> slurm_sweep_args(const std::string& db_path, const std::string& definition_path,
                                          const SlurmResources& resources) {
  check_slurm_resources(resources);
  std::vector<std::string> args = {"--db", db_path, "sweep", definition_path};
  for (std::string& a : slurm_cli_args(resources))
    args.push_back(std::move(a));
  args.push_back("--json");
  return args;
}

std::vector<std::pair<std::string, std::string>> sweep_name_knobs(const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(name);
  std::string token;
  bool first = true;
  while (in >> token) {
    const size_t eq = token.find('=');
    if (!first && eq != std::string::npos && eq > 0)
      out.emplace_back(token.substr(0, eq), token.substr(eq + 1));
    first = false;
  }
  return out;
}

bool knob_matches(const std::string& param, const std::string& knob) {
  return param == knob || (knob.find('.') == std::string::npos && leaf(param) == knob);
}

std::string check_sweep_value(const nlohmann::json& config, const std::string& knob, const std::string& value) {
  try {
    nlohmann::json c = config;
    apply_override(c, knob + "=" + value);
    validate_config(c);
    return {};
  } catch (const Error& e) {
    // Only this knob's lines: the base config's own problems are the designer's to show.
    std::string mine;
    for (const FieldMessage& m : split_config_errors(e.what()))
      if (m.path == knob || m.path.empty())
        mine += (mine.empty() ? "" : "\n") + m.message;
    return mine.empty() ? std::string(e.what()) : mine;
  }
}

std::vector<FieldMessage> split_config_errors(const std::string& text) {
  std::vector<FieldMessage> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    FieldMessage m;
    m.message = line;
    const size_t colon = line.find(": ");
    if (colon != std::string::npos) {
      std::string head = line.substr(0, colon);
      if (head.rfind("--set ", 0) == 0)
        head = head.substr(6);
      if (head.find(' ') == std::string::npos)
        m.path = head;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace lathe::ui
