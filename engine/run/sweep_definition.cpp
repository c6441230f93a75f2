// Sweep definition parsing and deterministic expansion (see sweep_definition.h).
#include "engine/run/sweep_definition.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/error.h"
#include "engine/core/rng.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"

namespace lathe {

namespace {

using nlohmann::json;

constexpr int64_t kMaxMembers = 100000;

[[noreturn]] void refuse(const std::string& field, const std::string& problem, const std::string& allowed) {
  throw ConfigError("sweep." + field + ": " + problem + "; allowed: " + allowed);
}

std::string short_json(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

const FieldSpec& knob_field(const std::string& section, const std::string& knob) {
  const FieldSpec* f = find_field(knob);
  if (!f)
    refuse(section + "." + knob, "not a config field", "a path from `lathe-cli schema`, e.g. prune.ratio");
  if (knob == "name")
    refuse(section + ".name", "the run name is set by the sweep", "any other config field");
  return *f;
}

/// The text `--set knob=<text>` takes for a JSON value: strings as they are, the rest as JSON.
std::string value_text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

int64_t integer_key(const json& def, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  if (!def.contains(key))
    return fallback;
  const json& v = def[key];
  const bool integral = v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (!integral || v.get<double>() < static_cast<double>(lo) || v.get<double>() > static_cast<double>(hi))
    refuse(key, short_json(v), "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int64_t>(v.get<double>());
}

struct RandomKnob {
  std::string knob;
  const FieldSpec* field = nullptr;
  enum class Kind { uniform, log_uniform, choice } kind = Kind::uniform;
  double lo = 0, hi = 0;
  json choices;

  std::string draw(Rng& rng) const {
    if (kind == Kind::choice)
      return value_text(choices[rng.below(choices.size())]);
    const double u = rng.uniform();
    double x = kind == Kind::uniform ? lo + (hi - lo) * u : std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * u);
    x = std::clamp(x, lo, hi);  // exp(log(hi)) may round a hair above hi
    if (field->kind == FieldSpec::Kind::integer)
      return std::to_string(std::llround(x));
    return json(x).dump();
  }
};

RandomKnob parse_random_knob(const std::string& knob, const json& spec) {
  RandomKnob r;
  r.knob = knob;
  r.field = &knob_field("random", knob);
  const std::string path = "random." + knob;
  const std::string allowed = R"({"uniform": [lo, hi]}, {"log_uniform": [lo, hi]} with 0 < lo, or a list of choices)";
  if (spec.is_array()) {
    if (spec.empty())
      refuse(path, "an empty choice list", "one or more values");
    r.kind = RandomKnob::Kind::choice;
    r.choices = spec;
    return r;
  }
  if (!spec.is_object() || spec.size() != 1)
    refuse(path, short_json(spec), allowed);
  const std::string kind = spec.begin().key();
  if (kind != "uniform" && kind != "log_uniform")
    refuse(path + "." + kind, "unknown distribution", "\"uniform\", \"log_uniform\"");
  r.kind = kind == "uniform" ? RandomKnob::Kind::uniform : RandomKnob::Kind::log_uniform;
  const json& range = spec.begin().value();
  if (!range.is_array() || range.size() != 2 || !range[0].is_number() || !range[1].is_number())
    refuse(path + "." + kind, short_json(range), "[lo, hi], two numbers");
  r.lo = range[0].get<double>();
  r.hi = range[1].get<double>();
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi) || !(r.lo < r.hi))
    refuse(path + "." + kind, short_json(range), "[lo, hi] with lo < hi, both finite");
  if (r.kind == RandomKnob::Kind::log_uniform && !(r.lo > 0))
    refuse(path + "." + kind, short_json(range), "[lo, hi] with 0 < lo < hi (a log scale)");
  if (r.field->kind != FieldSpec::Kind::integer && r.field->kind != FieldSpec::Kind::number)
    refuse(path + "." + kind, "the field is " + std::string(kind_name(r.field->kind)),
           "a range over integer or number fields; a choice list for the others");
  return r;
}

json load_base(const json& def, const std::string& definition_dir) {
  const bool has_base = def.contains("base"), has_config = def.contains("config");
  if (has_base == has_config)
    refuse("base", has_base ? "both base and config given" : "no base config",
           "exactly one of \"base\" (a config file path) and \"config\" (an inline config object)");
  if (has_config) {
    if (!def["config"].is_object())
      refuse("config", short_json(def["config"]), "a config object");
    return def["config"];
  }
  if (!def["base"].is_string() || def["base"].get<std::string>().empty())
    refuse("base", short_json(def["base"]), "a config file path (relative to the definition's folder)");
  std::filesystem::path p = def["base"].get<std::string>();
  if (p.is_relative() && !definition_dir.empty())
    p = std::filesystem::path(definition_dir) / p;
  return load_config_file(p.string());
}

}  // namespace

const std::vector<std::string>& sweep_definition_keys() {
  static const std::vector<std::string> keys = {"name",   "base",   "config", "grid",
                                                "random", "trials", "seed",   "repeat_seeds"};
  return keys;
}

std::string sweep_member_name(const std::string& base, const std::vector<std::string>& sets) {
  const auto leaf = [](const std::string& path) {
    const size_t dot = path.rfind('.');
    return dot == std::string::npos ? path : path.substr(dot + 1);
  };
  std::string name = base;
  for (const std::string& set : sets) {
    const size_t eq = set.find('=');
    const std::string path = set.substr(0, eq), value = eq == std::string::npos ? "" : set.substr(eq + 1);
    int same_leaf = 0;
    for (const std::string& other : sets)
      same_leaf += leaf(other.substr(0, other.find('='))) == leaf(path);
    name += (name.empty() ? "" : " ") + (same_leaf > 1 ? path : leaf(path)) + "=" + value;
  }
  return name;
}

SweepPlan plan_sweep_definition(const json& def, const std::string& definition_dir,
                                const std::vector<std::string>& base_sets) {
  if (!def.is_object())
    throw ConfigError("sweep: the definition is " + short_json(def) + "; allowed: a JSON object with keys " +
                      "name, base or config, grid, random, trials, seed, repeat_seeds");
  const std::vector<std::string>& keys = sweep_definition_keys();
  // An experiment config given where a definition goes (`lathe-cli sweep experiments/mlp.json`):
  // say so, rather than refusing its first section as an unknown key.
  if (!def.contains("base") && !def.contains("config") &&
      (def.contains("train") || def.contains("model") || def.contains("data")))
    throw ConfigError("sweep: this is an experiment config, not a sweep definition; a definition names a base "
                      "config (\"base\": \"FILE.json\" or \"config\": {...}) and what varies: grid "
                      "{knob: [values]}, random {knob: {...}} with trials, or repeat_seeds N (README, Sweeps)");
  for (auto it = def.begin(); it != def.end(); ++it)
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) {
      std::string list;
      for (const std::string& k : keys)
        list += (list.empty() ? "" : ", ") + k;
      refuse(it.key(), "unknown key", list);
    }

  json base = load_base(def, definition_dir);
  for (const std::string& s : base_sets)
    apply_override(base, s);
  const json filled = validate_config(base);  // the base's own problems, before any member's

  SweepPlan plan;
  if (def.contains("name") && (!def["name"].is_string() || def["name"].get<std::string>().empty()))
    refuse("name", short_json(def["name"]), "a non-empty string");
  plan.name = def.value("name", filled.value("name", std::string("sweep")));
  const std::string base_name = filled.value("name", std::string("experiment"));

  // Grid: nlohmann's objects are sorted by key, so the knob order is the paths' order.
  std::vector<std::pair<std::string, std::vector<std::string>>> grid;
  if (def.contains("grid")) {
    if (!def["grid"].is_object())
      refuse("grid", short_json(def["grid"]), "an object {knob: [values]}");
    for (auto it = def["grid"].begin(); it != def["grid"].end(); ++it) {
      knob_field("grid", it.key());
      if (!it.value().is_array() || it.value().empty())
        refuse("grid." + it.key(), short_json(it.value()), "a non-empty list of values");
      std::vector<std::string> values;
      for (const json& v : it.value())
        values.push_back(value_text(v));
      grid.emplace_back(it.key(), std::move(values));
    }
  }
  std::vector<RandomKnob> random;
  if (def.contains("random")) {
    if (!def["random"].is_object())
      refuse("random", short_json(def["random"]), "an object {knob: distribution or choice list}");
    for (auto it = def["random"].begin(); it != def["random"].end(); ++it) {
      if (def.contains("grid") && def["grid"].contains(it.key()))
        refuse("random." + it.key(), "the knob is also in grid", "each knob in grid or random, not both");
      random.push_back(parse_random_knob(it.key(), it.value()));
    }
  }
  const int64_t trials = integer_key(def, "trials", random.empty() ? 1 : 0, 1, kMaxMembers);
  if (random.empty() && trials != 1)
    refuse("trials", std::to_string(trials) + " with no random knobs", "1 (or add \"random\" knobs)");
  if (!random.empty() && !def.contains("trials"))
    refuse("trials", "missing with random knobs", "an integer from 1 to " + std::to_string(kMaxMembers));
  const uint64_t seed = static_cast<uint64_t>(integer_key(def, "seed", 0, 0, INT64_MAX));
  const int64_t repeats = integer_key(def, "repeat_seeds", 1, 1, 1000);
  const bool seed_swept = (def.contains("grid") && def["grid"].contains("seed")) ||
                          (def.contains("random") && def["random"].contains("seed"));
  if (repeats > 1 && seed_swept)
    refuse("repeat_seeds", std::to_string(repeats) + " while seed is a swept knob", "1 when grid or random sweeps seed");

  int64_t points = 1;
  for (const auto& axis : grid)
    points *= static_cast<int64_t>(axis.second.size());
  if (points > kMaxMembers || points * trials > kMaxMembers || points * trials * repeats > kMaxMembers)
    refuse("grid", "more than " + std::to_string(kMaxMembers) + " runs",
           "at most " + std::to_string(kMaxMembers) + " runs (grid points x trials x repeat_seeds)");

  // Each trial's draws, shared by every grid point.
  std::vector<std::vector<std::string>> trial_sets(static_cast<size_t>(trials));
  for (int64_t t = 0; t < trials; ++t) {
    Rng rng = Rng(seed).fork(static_cast<uint64_t>(t));
    for (const RandomKnob& r : random)
      trial_sets[t].push_back(r.knob + "=" + r.draw(rng));
  }
  const int64_t base_seed = filled.value("seed", int64_t{0});

  for (int64_t p = 0; p < points; ++p) {
    std::vector<std::string> point_sets;
    int64_t rest = p;
    for (size_t a = grid.size(); a-- > 0;) {  // the last knob varies fastest
      const auto& values = grid[a].second;
      point_sets.insert(point_sets.begin(), grid[a].first + "=" + values[rest % values.size()]);
      rest /= static_cast<int64_t>(values.size());
    }
    for (int64_t t = 0; t < trials; ++t)
      for (int64_t r = 0; r < repeats; ++r) {
        SweepMember m;
        m.index = static_cast<int>(plan.members.size());
        m.sets = point_sets;
        m.sets.insert(m.sets.end(), trial_sets[t].begin(), trial_sets[t].end());
        if (repeats > 1)
          m.sets.push_back("seed=" + std::to_string(base_seed + r));
        m.name = sweep_member_name(base_name, m.sets);
        m.config = base;
        try {
          for (const std::string& s : m.sets)
            apply_override(m.config, s);
          m.config["name"] = m.name;
          validate_config(m.config);
        } catch (const ConfigError& e) {
          throw ConfigError("sweep member " + std::to_string(m.index) + " (" + m.name + "):\n" + e.what());
        }
        plan.members.push_back(std::move(m));
      }
  }

  plan.stored_definition = {{"definition", def}, {"set", base_sets}, {"base_config", base}};
  return plan;
}

SweepPlan load_sweep_definition(const std::string& path, const std::vector<std::string>& base_sets) {
  std::ifstream in(path);
  if (!in)
    throw ConfigError("sweep definition " + path + ": cannot be read (missing or not a file)");
  std::stringstream text;
  text << in.rdbuf();
  const json def = parse_config_text(text.str(), "sweep definition " + path);
  return plan_sweep_definition(def, std::filesystem::path(path).parent_path().string(), base_sets);
}

}  // namespace lathe
