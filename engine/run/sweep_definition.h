// A sweep definition (JSON) expanded into the configs of its runs: a grid over any number of
// knobs, random draws over ranges or choice lists (seeded, reproducible), and N repeats with
// consecutive seeds. Deterministic: the same definition gives the same members in the same order
// on every machine. lathe-cli sweep stores the plan (engine/store/sweep_store.h) and runs it.
//
//   {"name": "prune-study", "base": "mlp.json" | "config": {...},
//    "grid": {"prune.ratio": [0.25, 0.5]},
//    "random": {"train.optimizer.lr": {"log_uniform": [1e-4, 0.1]}, "train.optimizer.name": ["sgd", "adamw"]},
//    "trials": 4, "seed": 0, "repeat_seeds": 3}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe {

/// One run of a sweep: its position, the `knob=value` assignments that make it, its name and its
/// config (the base with those assignments applied and `name` set; validated at planning).
struct SweepMember {
  int index = 0;
  std::vector<std::string> sets;
  std::string name;
  nlohmann::json config;
};

struct SweepPlan {
  std::string name;
  /// What the store keeps: the definition as given, the --set list applied to the base and the
  /// base config itself (inline), so a sweep can be re-planned without its files.
  nlohmann::json stored_definition;
  std::vector<SweepMember> members;
};

/// Top-level keys a definition may have.
const std::vector<std::string>& sweep_definition_keys();

/// Expands `definition`. A relative `base` path is read relative to `definition_dir`; `base_sets`
/// (`knob=value`, lathe-cli's --set) are applied to the base before the sweep's knobs. Order: grid
/// points (knobs sorted by path, the first outermost), then trials, then seeds (innermost, so a
/// seed group is adjacent). Trial t draws its random values from Rng(seed).fork(t) in knob order,
/// so every grid point sees the same draws for the same trial. Integer knobs take the rounded draw.
/// ConfigError naming the field (`sweep.grid.<knob>`, `sweep.random.<knob>.log_uniform`, ...) and
/// what is allowed, or naming the member whose config the validator refuses.
SweepPlan plan_sweep_definition(const nlohmann::json& definition, const std::string& definition_dir,
                                const std::vector<std::string>& base_sets = {});

/// Reads a definition file (ConfigError naming the file when it is not JSON) and plans it.
SweepPlan load_sweep_definition(const std::string& path, const std::vector<std::string>& base_sets = {});

/// "mlp lr=0.02 ratio=0.5": the base name and each `knob=value`, the knob by its last path part
/// (the whole path when two knobs share that part).
std::string sweep_member_name(const std::string& base, const std::vector<std::string>& sets);

}  // namespace lathe
