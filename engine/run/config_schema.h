// The experiment config schema: one table of every field, its type, default, range and doc.
// It is the single source of truth: validate_config() checks against it, lathe-cli prints it for
// --help, and the Qt experiment form is generated from schema_as_json(), so nothing about a field
// is written down twice.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe {

/// One leaf field of the experiment JSON document.
struct FieldSpec {
  enum class Kind { integer, number, boolean, string, enumeration, object_list };

  std::string path;  ///< dotted JSON path, e.g. "train.optimizer.lr"
  Kind kind = Kind::string;
  nlohmann::json default_value;  ///< null = no default / derived at parse time
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  std::vector<std::string> choices;  ///< for Kind::enumeration, in display order
  std::string doc;                   ///< one line for tooltips and --help
  /// false: the field exists (schema, GUI) but only its default is accepted until the feature lands.
  bool supported = true;
  std::string unsupported_reason;  ///< e.g. "pruning lands with issue 5"
  std::string section;             ///< GUI group: "experiment", "data", "model", "train", ...
  /// One test on another field's value (the config's, or that field's default where the config
  /// leaves it out): it holds one of `values`; it is a number above `bound`; it is a non-empty string;
  /// it is a string that starts with `prefix`; it is not one (any other value, a non-string included).
  struct Condition {
    enum class Test { one_of, above, non_empty, starts_with, not_starts_with };
    std::string path;
    Test test = Test::one_of;
    std::vector<nlohmann::json> values;  ///< one_of
    double bound = 0;                    ///< above
    std::string prefix;                  ///< starts_with, not_starts_with
  };
  /// Where the field means something: every clause holds, a clause when any of its conditions does
  /// (quant.percentile: quant.mode is "ptq-static" or "qat", and quant.calibration is "percentile"
  /// or quant.compare_calibrators is true). Empty: always. The GUI disables a field that does not
  /// apply and lathe-cli warns when one is set; validation does not depend on it. A condition must
  /// hold wherever the engine reads the field, so that no field with an effect is greyed out.
  std::vector<std::vector<Condition>> applies_when;
};

/// Every field, in the order the GUI and --help show them: the core sections, then each registered
/// stage's fields (Stage::schema_fields, in pipeline order), then checkpoint, cost and output.
const std::vector<FieldSpec>& experiment_schema();

/// Builders that make one schema row read as one line (FieldSpec::section = the path's first part).
namespace schema {
FieldSpec field(std::string path, FieldSpec::Kind kind, nlohmann::json def, std::string doc);
FieldSpec integer(std::string path, int64_t def, double min, double max, std::string doc);
FieldSpec number(std::string path, nlohmann::json def, double min, double max, std::string doc,
                 bool min_exclusive = false, bool max_exclusive = false);
FieldSpec boolean(std::string path, bool def, std::string doc);
FieldSpec string(std::string path, std::string def, std::string doc);
/// The default is the first choice unless `def` names another.
FieldSpec enumeration(std::string path, std::vector<std::string> choices, std::string doc, std::string def = "");
FieldSpec unsupported(FieldSpec f, std::string reason);
/// Conditions (FieldSpec::Condition): `path` holds one of `values`; is a number above `bound`; is a
/// non-empty string; is a string starting with `prefix`; is not one.
FieldSpec::Condition one_of(std::string path, std::vector<nlohmann::json> values);
FieldSpec::Condition above(std::string path, double bound);
FieldSpec::Condition non_empty(std::string path);
FieldSpec::Condition starts_with(std::string path, std::string prefix);
FieldSpec::Condition not_starts_with(std::string path, std::string prefix);
/// `f` applies only where one of `any` holds, and every clause added before (FieldSpec::applies_when).
FieldSpec only_when(FieldSpec f, std::vector<FieldSpec::Condition> any);
/// `f` applies only while the enumeration field `on` holds one of `values`.
FieldSpec only_when(FieldSpec f, std::string on, std::vector<std::string> values);
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace schema

/// The field at `path`, or nullptr when there is none.
const FieldSpec* find_field(const std::string& path);

/// "integer", "number", "boolean", "string", "enumeration", "object_list".
const char* kind_name(FieldSpec::Kind kind);

/// Human text for what a field accepts, e.g. `an integer from 1 to 10000`, `one of "sgd", "adamw"`.
std::string describe_allowed(const FieldSpec& field);

/// Whether `field` applies to the config document `cfg` (FieldSpec::applies_when); a controlling
/// field `cfg` leaves out counts as its default. The one evaluation of a condition: lathe-cli's
/// warnings and the designer's enabled state both come from here.
bool field_applies(const FieldSpec& field, const nlohmann::json& cfg);

/// Why `field` does not apply to `cfg`: the value of each field in the clauses that fail, e.g.
/// `data.dataset is "npz"` or `quant.calibration is "minmax", the default; quant.compare_calibrators
/// is false, the default`; "" when it applies.
std::string why_not_applies(const FieldSpec& field, const nlohmann::json& cfg);

/// The fields `cfg` sets that do not apply to it (FieldSpec::applies_when), one sentence each:
/// `data.image_size is set but only used when data.dataset is "folder" (data.dataset is
/// "fashion-mnist"): it has no effect`. Validation accepts them; lathe-cli warns.
std::vector<std::string> unused_fields(const nlohmann::json& cfg);

/// When a field applies, as text: `data.dataset is "folder"`, `data.dataset is "fashion-mnist",
/// "npz" or "folder"`, `cost.interruptions_per_hour > 0`, `distill.teacher is not empty`,
/// `distill.teacher starts with "zoo:"`, `distill.teacher does not start with "zoo:"`, clauses
/// joined by ", and " (a clause of several conditions in parentheses then); "" for a field that
/// always applies.
std::string describe_applies_when(const FieldSpec& field);

/// The schema as JSON, for generating forms: {"version": 2, "fields": [{"path", "kind", "default",
/// "min"?, "max"?, "min_exclusive", "max_exclusive", "choices"?, "doc", "supported",
/// "unsupported_reason"?, "section", "applies_when"?}, ...]}. applies_when is {"all_of": [{"any_of":
/// [{"path", "test": "one_of" | "above" | "non_empty" | "starts_with" | "not_starts_with", "values"? |
/// "bound"? | "prefix"?}, ...]}, ...], "text":
/// describe_applies_when}. Infinite bounds are left out, and applies_when for a field that always
/// applies.
nlohmann::json schema_as_json();

}  // namespace lathe
