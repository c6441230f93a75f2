// Sweeps and validator messages as data: expanding one or two knobs into the --set lists of the
// runs to queue, and splitting a ConfigError message into (JSON path, message) lines that the
// form marks at its fields. No Qt.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/run/slurm_options.h"

namespace lathe::ui {

struct SweepAxis {
  std::string knob;                 ///< a schema path, e.g. "prune.ratio"
  std::vector<std::string> values;  ///< as typed, e.g. {"0.3", "0.5"}
};

/// One `--set` list per run: the cartesian product of the axes in order (first axis outermost).
/// Axes with an empty knob are ignored. ConfigError for an axis with a knob and no values, or a
/// knob that is not a schema field (naming the field).
std::vector<std::vector<std::string>> expand_sweep(const std::vector<SweepAxis>& axes);

/// The name of one sweep run: the base name and its values, "mlp-fashion lr=0.02 ratio=0.5", each
/// knob by its last path part (the whole path when two knobs share it). `sets` are "path=value".
std::string sweep_run_name(const std::string& base, const std::vector<std::string>& sets);

/// One run of a sweep: the base config named by its values, and its --set list.
struct SweepRun {
  nlohmann::json config;
  std::vector<std::string> sets;
  std::string name;
  std::string run_id;  ///< the run id planned for it by store_sweep() ("" before)
};
/// expand_sweep() of `axes`, each run's config named sweep_run_name(base's name, its sets).
std::vector<SweepRun> plan_sweep(const nlohmann::json& base, const std::vector<SweepAxis>& axes);

/// Stores `runs` (plan_sweep of `axes` over `base`) as a sweep in the store at `db_path`: its
/// definition ({"config": base, "grid": {knob: [values]}}), one member per run with its config
/// (the --set list applied) and a run id planned now (filled into each run's run_id), so the run
/// browser shows the sweep's progress as the queue runs them with `--run-id`. Returns the sweep id.
std::string store_sweep(const std::string& db_path, const nlohmann::json& base, const std::vector<SweepAxis>& axes,
                        std::vector<SweepRun>& runs);

/// The sweep definition (engine/run/sweep_definition.h) of `axes` over `base`, what `lathe-cli
/// sweep DEF` reads: {"name": base's name, "config": base, "grid": {knob: [values as typed]}}.
/// ConfigError (as expand_sweep) for an axis with a knob and no values or an unknown knob.
nlohmann::json sweep_definition(const nlohmann::json& base, const std::vector<SweepAxis>& axes);

/// The arguments of the `lathe-cli` child that submits the definition file `definition_path` to
/// Slurm for the store at `db_path`: `--db DB sweep DEF --slurm --out OUT ... --json` (the
/// resources through slurm_cli_args, the same options a terminal user types). Throws ConfigError
/// from check_slurm_resources first.
std::vector<std::string> slurm_sweep_args(const std::string& db_path, const std::string& definition_path,
                                          const SlurmResources& resources);

/// The knob=value tokens of a sweep run's name ("mlp-fashion lr=0.02" -> {{"lr", "0.02"}}).
std::vector<std::pair<std::string, std::string>> sweep_name_knobs(const std::string& name);

/// Whether `param` (a flattened config key, e.g. "train.optimizer.lr") is the knob a sweep name
/// calls `knob` ("lr" or the whole path).
bool knob_matches(const std::string& param, const std::string& knob);

/// Checks one sweep value as `knob=value` would be applied to `config`: "" when it is accepted,
/// else the validator's message (the value and what is allowed).
std::string check_sweep_value(const nlohmann::json& config, const std::string& knob, const std::string& value);

/// "0.3, 0.5 ,0.7" -> {"0.3", "0.5", "0.7"} (commas or whitespace separate).
std::vector<std::string> split_values(const std::string& text);

struct FieldMessage {
  std::string path;     ///< the JSON path the line starts with ("" when it names none)
  std::string message;  ///< the whole line
};

/// Splits a validate_config() error text (one problem per line, each "path: ...") into lines.
std::vector<FieldMessage> split_config_errors(const std::string& text);

}  // namespace lathe::ui
