// Experiment config: defaults filled from the schema, every kind of error reported with its path,
// the bad value and what is allowed, --set overrides, and the typed struct (lr default per model).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/backend/cpu/reference_backend.h"
#include "engine/core/error.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/nn/zoo.h"
#include "engine/run/config.h"
#include "engine/run/config_schema.h"

namespace lathe {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The message of the ConfigError that validate_config throws for `cfg` ("" when it passes).
std::string problems_of(const json& cfg) {
  try {
    validate_config(cfg);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing: " << (needle) << "\nin: " << (haystack)

const json& at_path(const json& j, const std::string& path) {
  const json* node = &j;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    node = &node->at(path.substr(start, dot - start));
    if (dot == std::string::npos)
      return *node;
    start = dot + 1;
  }
}

TEST(ConfigSchema, PathsAreUniqueDocumentedAndSectioned) {
  std::set<std::string> paths;
  for (const FieldSpec& f : experiment_schema()) {
    EXPECT_TRUE(paths.insert(f.path).second) << "duplicate " << f.path;
    EXPECT_FALSE(f.doc.empty()) << f.path;
    EXPECT_FALSE(f.section.empty()) << f.path;
    if (!f.supported)
      EXPECT_FALSE(f.unsupported_reason.empty()) << f.path;
    if (f.kind == FieldSpec::Kind::enumeration) {
      EXPECT_FALSE(f.choices.empty()) << f.path;
      EXPECT_NE(std::find(f.choices.begin(), f.choices.end(), f.default_value.get<std::string>()), f.choices.end())
          << f.path;
    }
  }
  for (const char* p :
       {"name", "seed", "description", "data.augment.strength", "model.layers", "train.optimizer.lr",
        "train.schedule.min_lr", "compute.grad_compression", "prune.finetune_epochs", "distill.feature_weight",
        "quant.calib_samples", "checkpoint.keep", "cost.interruptions_per_hour", "output.dir"})
    EXPECT_TRUE(paths.count(p)) << p;
  EXPECT_EQ(find_field("train.optimizer.lr")->section, "train");
  EXPECT_EQ(find_field("seed")->section, "experiment");
  EXPECT_EQ(find_field("nope"), nullptr);
}

TEST(ConfigSchema, EveryDefaultPassesItsOwnChecks) {
  // Setting each field explicitly to its default must validate: catches a default outside its
  // own range or choices in the table.
  for (const FieldSpec& f : experiment_schema()) {
    json cfg = json::object();
    apply_override(cfg, f.path + "=" + f.default_value.dump());
    EXPECT_EQ(problems_of(cfg), "") << f.path;
  }
}

TEST(ConfigSchema, AsJsonIsIntrospectable) {
  const json s = schema_as_json();
  ASSERT_EQ(s.at("fields").size(), experiment_schema().size());
  const json* lr = nullptr;
  const json* prune = nullptr;
  for (const json& f : s.at("fields")) {
    if (f.at("path") == "train.optimizer.lr")
      lr = &f;
    if (f.at("path") == "prune.method")
      prune = &f;
  }
  ASSERT_TRUE(lr && prune);
  EXPECT_EQ(lr->at("kind"), "number");
  EXPECT_TRUE(lr->at("default").is_null());
  EXPECT_EQ(lr->at("min"), 0.0);
  EXPECT_EQ(lr->at("max"), 10.0);
  EXPECT_EQ(lr->at("min_exclusive"), true);
  EXPECT_EQ(prune->at("supported"), true);
  EXPECT_EQ(prune->at("choices").size(), 5u);
  EXPECT_FALSE(find_field("seed") == nullptr);
  EXPECT_FALSE(s.at("fields")[1].contains("max"));  // seed: no upper bound, so none is written
}

// applies_when: every condition names an enumeration field and values among its choices; the
// dataset's conditions are exactly the fields the loaders read per dataset (data_setup.cpp), and
// validate_config's own "only used when" refusals agree with them.
// A knob the config sets where it does nothing is named with what would make it count and what the
// controlling field is now (the user's value, or the default); set where it applies, or not set
// at all, nothing is said.
TEST(ConfigSchema, UnusedFieldsAreTheSetOnesThatDoNotApply) {
  using nlohmann::json;
  const auto one = lathe::unused_fields(json::parse(R"({"data": {"dataset": "fashion-mnist", "image_size": 64}})"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_NE(one[0].find("data.image_size is set but only used when data.dataset is \"folder\""), std::string::npos)
      << one[0];
  EXPECT_NE(one[0].find("(data.dataset is \"fashion-mnist\")"), std::string::npos) << one[0];
  const auto by_default = lathe::unused_fields(json::parse(R"({"data": {"channels": 3}})"));
  ASSERT_EQ(by_default.size(), 1u);
  EXPECT_NE(by_default[0].find("data.channels"), std::string::npos) << by_default[0];
  EXPECT_NE(by_default[0].find(", the default)"), std::string::npos) << by_default[0];
  EXPECT_TRUE(lathe::unused_fields(json::parse(R"({"data": {"dataset": "folder", "image_size": 64}})")).empty());
  EXPECT_TRUE(lathe::unused_fields(json::parse(R"({"data": {"dataset": "fashion-mnist"}, "seed": 3})")).empty());
  const auto two = lathe::unused_fields(
      json::parse(R"({"train": {"optimizer": {"type": "sgd", "beta1": 0.8}}, "data": {"image_size": 28}})"));
  EXPECT_EQ(two.size(), 2u);
}

TEST(ConfigSchema, AppliesWhenNamesRealChoicesAndAgreesWithValidation) {
  using Test = FieldSpec::Condition::Test;
  std::map<std::string, std::vector<std::string>> by_dataset;
  for (const FieldSpec& f : experiment_schema()) {
    for (const auto& any : f.applies_when) {
      EXPECT_FALSE(any.empty()) << f.path;
      for (const FieldSpec::Condition& c : any) {
        const FieldSpec* on = find_field(c.path);
        ASSERT_NE(on, nullptr) << f.path << " depends on " << c.path;
        EXPECT_NE(on->path, f.path) << f.path << " depends on itself";
        switch (c.test) {
          case Test::one_of:  // choices of an enumeration, or true / false of a boolean
            EXPECT_FALSE(c.values.empty()) << f.path;
            for (const json& v : c.values) {
              if (on->kind == FieldSpec::Kind::boolean) {
                EXPECT_TRUE(v.is_boolean()) << f.path << ": " << v;
              } else if (on->kind == FieldSpec::Kind::integer || on->kind == FieldSpec::Kind::number) {
                // a value in range (lowrank.rank 0: the rank is chosen), or the condition never holds
                ASSERT_TRUE(v.is_number()) << f.path << ": " << v;
                EXPECT_GE(v.get<double>(), on->min) << f.path;
                EXPECT_LE(v.get<double>(), on->max) << f.path;
              } else {
                ASSERT_EQ(on->kind, FieldSpec::Kind::enumeration) << f.path << " on " << c.path;
                ASSERT_TRUE(v.is_string()) << f.path << ": " << v;
                EXPECT_NE(std::find(on->choices.begin(), on->choices.end(), v.get<std::string>()), on->choices.end())
                    << f.path << ": " << v;
              }
            }
            if (on->path == "data.dataset")
              for (const json& v : c.values)
                by_dataset[f.path].push_back(v.get<std::string>());
            break;
          case Test::above:  // a bound inside the field's range, or it could never (or always) hold
            EXPECT_TRUE(on->kind == FieldSpec::Kind::integer || on->kind == FieldSpec::Kind::number) << f.path;
            EXPECT_GE(c.bound, on->min) << f.path;
            EXPECT_LT(c.bound, on->max) << f.path;
            break;
          case Test::non_empty:
            EXPECT_EQ(on->kind, FieldSpec::Kind::string) << f.path << " on " << c.path;
            break;
          case Test::starts_with:
          case Test::not_starts_with:
            EXPECT_EQ(on->kind, FieldSpec::Kind::string) << f.path << " on " << c.path;
            EXPECT_FALSE(c.prefix.empty()) << f.path;
            break;
        }
      }
    }
  }
  const FieldSpec& size = *find_field("data.image_size");
  EXPECT_FALSE(field_applies(size, json::object()));  // the default dataset is fashion-mnist
  EXPECT_FALSE(field_applies(size, {{"data", {{"dataset", "npz"}}}}));
  EXPECT_TRUE(field_applies(size, {{"data", {{"dataset", "folder"}}}}));
  EXPECT_TRUE(field_applies(*find_field("train.optimizer.momentum"), json::object()));  // sgd by default
  EXPECT_FALSE(field_applies(*find_field("train.optimizer.beta1"), json::object()));
  EXPECT_TRUE(field_applies(*find_field("seed"), json::object()));
  EXPECT_EQ(describe_applies_when(size), "data.dataset is \"folder\"");
  EXPECT_EQ(describe_applies_when(*find_field("data.path")),
            "data.dataset is \"fashion-mnist\", \"npz\" or \"folder\"");
  EXPECT_EQ(describe_applies_when(*find_field("seed")), "");

  // validate_config refuses an IDX file name or a custom model's layers exactly where the field
  // does not apply.
  for (const std::string dataset : {"fashion-mnist", "idx", "npz", "folder"}) {
    const json cfg = {{"data", {{"dataset", dataset}, {"path", "x"}, {"train_images", "a.idx"}}}};
    const bool refused = problems_of(cfg).find("data.train_images: only used when") != std::string::npos;
    EXPECT_EQ(refused, !field_applies(*find_field("data.train_images"), cfg)) << dataset;
  }
  for (const std::string zoo : {"mlp", "custom"}) {
    const json cfg = {
        {"model", {{"zoo", zoo}, {"layers", json::array({{{"type", "flatten"}}, {{"type", "linear"}, {"out", 10}}})}}}};
    const bool refused = problems_of(cfg).find("model.layers: only used when") != std::string::npos;
    EXPECT_EQ(refused, !field_applies(*find_field("model.layers"), cfg)) << zoo;
  }

  // schema_as_json carries it (lathe-cli schema prints this), and only where there is a condition.
  const json schema = schema_as_json();  // a range-for over a temporary's member would dangle
  for (const json& f : schema.at("fields")) {
    if (f.at("path") == "data.channels")
      EXPECT_EQ(
          f.at("applies_when"),
          json::parse(R"({"all_of": [{"any_of": [{"path": "data.dataset", "test": "one_of", "values": ["folder"]}]}],
                                "text": "data.dataset is \"folder\""})"));
    if (f.at("path") == "cost.notice_s")
      EXPECT_EQ(f.at("applies_when").at("all_of"),
                json::parse(R"([{"any_of": [{"path": "cost.interruptions_per_hour", "test": "above", "bound": 0}]}])"));
    if (f.at("path") == "distill.alpha")
      EXPECT_EQ(f.at("applies_when").at("all_of"),
                json::parse(R"([{"any_of": [{"path": "distill.teacher", "test": "non_empty"}]}])"));
    if (f.at("path") == "data.train_subset")
      EXPECT_FALSE(f.contains("applies_when"));
  }
}

// The conditions beyond "is one of": a number above a bound (cost.notice_s is the spot
// simulation's), a non-empty string (distill.* need a teacher), a clause of several conditions
// (quant.percentile: percentile calibration, or every calibrator compared) and clauses that must
// all hold (distill.feature_weight: a teacher and feature pairs). Each holds and fails where the
// engine reads the field or does not.
TEST(ConfigSchema, AboveNonEmptyAndCompoundConditions) {
  const FieldSpec& notice_s = *find_field("cost.notice_s");
  EXPECT_FALSE(field_applies(notice_s, json::object()));
  EXPECT_FALSE(field_applies(notice_s, {{"cost", {{"interruptions_per_hour", 0}}}}));
  EXPECT_TRUE(field_applies(notice_s, {{"cost", {{"interruptions_per_hour", 0.5}}}}));
  EXPECT_TRUE(field_applies(notice_s, {{"cost", {{"interruptions_per_hour", 2}}}}));
  EXPECT_EQ(describe_applies_when(notice_s), "cost.interruptions_per_hour > 0");

  const FieldSpec& alpha = *find_field("distill.alpha");
  EXPECT_FALSE(field_applies(alpha, json::object()));
  EXPECT_FALSE(field_applies(alpha, {{"distill", {{"teacher", ""}}}}));
  EXPECT_TRUE(field_applies(alpha, {{"distill", {{"teacher", "zoo:teacher"}}}}));
  EXPECT_EQ(describe_applies_when(alpha), "distill.teacher is not empty");
  EXPECT_EQ(why_not_applies(alpha, json::object()), "distill.teacher is \"\", the default");
  EXPECT_EQ(why_not_applies(alpha, {{"distill", {{"teacher", "run:x"}}}}), "");

  const FieldSpec& weight = *find_field("distill.feature_weight");
  EXPECT_FALSE(field_applies(weight, {{"distill", {{"teacher", "zoo:teacher"}}}}));
  EXPECT_FALSE(field_applies(weight, {{"distill", {{"feature_pairs", "1:8"}}}}));
  EXPECT_TRUE(field_applies(weight, {{"distill", {{"teacher", "zoo:teacher"}, {"feature_pairs", "1:8"}}}}));
  EXPECT_EQ(describe_applies_when(weight), "distill.teacher is not empty, and distill.feature_pairs is not empty");

  const FieldSpec& percentile = *find_field("quant.percentile");
  const json ptq = {{"quant", {{"mode", "ptq-static"}}}};
  EXPECT_FALSE(field_applies(percentile, json::object()));  // no quantization
  EXPECT_FALSE(field_applies(percentile, ptq));             // minmax calibration
  json pct = ptq;
  pct["quant"]["calibration"] = "percentile";
  EXPECT_TRUE(field_applies(percentile, pct));
  json compare = ptq;
  compare["quant"]["compare_calibrators"] = true;  // the percentile calibrator is among those compared
  EXPECT_TRUE(field_applies(percentile, compare));
  pct["quant"]["mode"] = "ptq-dynamic";  // no calibration at all
  EXPECT_FALSE(field_applies(percentile, pct));
  EXPECT_EQ(describe_applies_when(percentile),
            "quant.mode is \"ptq-static\" or \"qat\", and (quant.calibration is \"percentile\" or "
            "quant.compare_calibrators is true)");
  EXPECT_EQ(why_not_applies(percentile, ptq),
            "quant.calibration is \"minmax\", the default; quant.compare_calibrators is false, the default");

  // The warnings name what would make the field count and what the controlling fields are now.
  const auto unused = unused_fields(json::parse(
      R"({"cost": {"notice_s": 30}, "distill": {"alpha": 0.5}, "quant": {"mode": "qat", "percentile": 99.9}})"));
  ASSERT_EQ(unused.size(), 3u);
  EXPECT_EQ(unused[0],
            "distill.alpha is set but only used when distill.teacher is not empty (distill.teacher is \"\", the "
            "default): it has no effect");
  EXPECT_NE(unused[1].find("quant.percentile is set but only used when"), std::string::npos) << unused[1];
  EXPECT_EQ(unused[2],
            "cost.notice_s is set but only used when cost.interruptions_per_hour > 0 (cost.interruptions_per_hour "
            "is 0, the default): it has no effect");
  EXPECT_TRUE(unused_fields(json::parse(R"({"cost": {"notice_s": 30, "interruptions_per_hour": 1},
                                            "distill": {"alpha": 0.5, "teacher": "zoo:teacher"},
                                            "quant": {"mode": "qat", "percentile": 99.9, "compare_calibrators": true}})"))
                  .empty());

  // Decisions the engine dictates: the data-parallel knobs have no condition (srun / torchrun set
  // the world size with compute.devices 1), GPU telemetry follows a backend that may be a GPU.
  for (const char* path : {"compute.rendezvous", "compute.rendezvous_id", "compute.timeout_s", "compute.bucket_mb",
                           "compute.grad_compression", "compute.shard_optimizer", "cost.notice_provider"})
    EXPECT_TRUE(find_field(path)->applies_when.empty()) << path;
  EXPECT_TRUE(field_applies(*find_field("compute.telemetry_s"), json::object()));  // auto
  EXPECT_FALSE(field_applies(*find_field("compute.telemetry_s"), {{"compute", {{"backend", "cpu"}}}}));
}

// The prune.* knobs each method reads (stage_prune.cpp, stage_prune_structured.cpp): method none runs
// no stage, so nothing but the method applies; nm reads no ratio (1 - n/m) but for sensitivity_pick,
// the structured methods no schedule and no sensitivity analysis; AGP is l1-unstructured's.
TEST(ConfigSchema, PruneKnobsApplyWhereTheirMethodReadsThem) {
  using Paths = std::vector<std::string>;
  const auto applying = [](const json& prune) {
    Paths out;
    const json cfg = {{"prune", prune}};
    for (const FieldSpec& f : experiment_schema())
      if (f.section == "prune" && field_applies(f, cfg))
        out.push_back(f.path.substr(std::string("prune.").size()));
    return out;
  };
  const Paths common = {"finetune_epochs", "finetune_lr_scale", "exclude"};
  const auto with = [&](Paths head, const Paths& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  EXPECT_EQ(applying(json::object()), Paths{"method"});  // none, the default
  EXPECT_EQ(applying({{"method", "none"}, {"schedule", "agp"}, {"sensitivity", true}, {"sensitivity_pick", true}}),
            Paths{"method"});
  EXPECT_EQ(applying({{"method", "l1-unstructured"}}),
            with(with({"method", "ratio", "scope", "schedule"}, common), {"sensitivity"}));
  EXPECT_EQ(applying({{"method", "l1-unstructured"}, {"schedule", "agp"}, {"sensitivity", true}}),
            with(with({"method", "ratio", "scope", "schedule"}, common),
                 {"agp.initial", "agp.start_step", "agp.end_step", "agp.frequency", "sensitivity",
                  "sensitivity_samples", "sensitivity_pick"}));
  for (const char* structured : {"l1-structured", "l2-structured"})
    EXPECT_EQ(applying({{"method", structured}, {"schedule", "agp"}, {"sensitivity", true}}),
              with({"method", "ratio", "scope"}, common))
        << structured;
  EXPECT_EQ(applying({{"method", "nm"}, {"schedule", "agp"}}),
            with(with({"method"}, common), {"nm_n", "nm_m", "sensitivity"}));
  EXPECT_EQ(applying({{"method", "nm"}, {"sensitivity", true}, {"sensitivity_pick", true}}),
            with(with({"method", "ratio"}, common),
                 {"nm_n", "nm_m", "sensitivity", "sensitivity_samples", "sensitivity_pick"}));

  EXPECT_EQ(describe_applies_when(*find_field("prune.agp.frequency")),
            "prune.method is \"l1-unstructured\", and prune.schedule is \"agp\"");
  EXPECT_EQ(describe_applies_when(*find_field("prune.ratio")),
            "prune.method is \"l1-unstructured\", \"l1-structured\", \"l2-structured\" or \"nm\", and (prune.method is "
            "\"l1-unstructured\", \"l1-structured\" or \"l2-structured\" or prune.sensitivity_pick is true)");
  const auto unused = unused_fields(json::parse(R"({"prune": {"ratio": 0.7, "exclude": "0"}})"));
  ASSERT_EQ(unused.size(), 2u);
  EXPECT_EQ(unused[1],
            "prune.exclude is set but only used when prune.method is \"l1-unstructured\", \"l1-structured\", "
            "\"l2-structured\" or \"nm\" (prune.method is \"none\", the default): it has no effect");
}

// lowrank.*: nothing with method none; factorize.cpp takes lowrank.rank when it is above 0, else
// chooses the rank by energy when that is above 0, else by target_bytes_ratio, within the scope.
TEST(ConfigSchema, LowRankKnobsApplyWhereTheRankChoiceReadsThem) {
  using Paths = std::vector<std::string>;
  const auto applying = [](const json& lowrank) {
    Paths out;
    const json cfg = {{"lowrank", lowrank}};
    for (const FieldSpec& f : experiment_schema())
      if (f.section == "lowrank" && field_applies(f, cfg))
        out.push_back(f.path.substr(std::string("lowrank.").size()));
    return out;
  };
  EXPECT_EQ(applying({{"rank", 4}, {"energy", 0.9}, {"exclude", "0"}}), Paths{"method"});  // none, the default
  EXPECT_EQ(applying({{"method", "svd"}}), (Paths{"method", "rank", "energy", "target_bytes_ratio", "scope", "exclude",
                                                  "finetune_epochs", "finetune_lr_scale"}));
  EXPECT_EQ(applying({{"method", "svd"}, {"energy", 0.0}}), applying({{"method", "svd"}}));  // 0.0 is 0
  EXPECT_EQ(applying({{"method", "svd"}, {"rank", 8}}),
            (Paths{"method", "rank", "exclude", "finetune_epochs", "finetune_lr_scale"}));
  EXPECT_EQ(applying({{"method", "svd"}, {"energy", 0.95}, {"scope", "global"}}),
            (Paths{"method", "rank", "energy", "scope", "exclude", "finetune_epochs", "finetune_lr_scale"}));
  EXPECT_EQ(describe_applies_when(*find_field("lowrank.target_bytes_ratio")),
            "lowrank.method is \"svd\", and lowrank.rank is 0, and lowrank.energy is 0");
  EXPECT_EQ(why_not_applies(*find_field("lowrank.scope"), {{"lowrank", {{"method", "svd"}, {"rank", 8}}}}),
            "lowrank.rank is 8");
}

// "Starts with": only a zoo:<name> teacher is trained in the run (distill.teacher_epochs); a saved
// teacher's outputs go to distill.teacher_cache, which the stage ignores for a zoo teacher.
TEST(ConfigSchema, TeacherKnobsFollowTheTeacherKind) {
  const FieldSpec& epochs = *find_field("distill.teacher_epochs");
  const FieldSpec& cache = *find_field("distill.teacher_cache");
  const auto teacher = [](const std::string& t) { return json{{"distill", {{"teacher", t}}}}; };
  EXPECT_FALSE(field_applies(epochs, json::object()));
  EXPECT_TRUE(field_applies(epochs, teacher("zoo:cnn")));
  EXPECT_FALSE(field_applies(epochs, teacher("run:baseline")));
  EXPECT_FALSE(field_applies(epochs, teacher("teacher.safetensors")));
  EXPECT_FALSE(field_applies(epochs, teacher("ZOO:cnn")));  // the engine's test is case-sensitive
  EXPECT_FALSE(field_applies(cache, json::object()));
  EXPECT_FALSE(field_applies(cache, teacher("zoo:cnn")));
  EXPECT_TRUE(field_applies(cache, teacher("run:baseline")));
  EXPECT_TRUE(field_applies(cache, teacher("teacher.onnx")));
  EXPECT_FALSE(field_applies(cache, {{"distill", {{"teacher", "run:baseline"}, {"cache_teacher", false}}}}));
  EXPECT_EQ(describe_applies_when(epochs), "distill.teacher starts with \"zoo:\"");
  EXPECT_EQ(describe_applies_when(cache),
            "distill.teacher is not empty, and distill.cache_teacher is true, and distill.teacher does not start "
            "with \"zoo:\"");
  EXPECT_EQ(why_not_applies(cache, teacher("zoo:cnn")), "distill.teacher is \"zoo:cnn\"");
  const auto unused = unused_fields(json::parse(R"({"distill": {"teacher": "run:b", "teacher_epochs": 3}})"));
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0],
            "distill.teacher_epochs is set but only used when distill.teacher starts with \"zoo:\" (distill.teacher "
            "is \"run:b\"): it has no effect");
  const json schema = schema_as_json();  // a range-for over a temporary's member would dangle
  for (const json& f : schema.at("fields"))
    if (f.at("path") == "distill.teacher_epochs")
      EXPECT_EQ(f.at("applies_when").at("all_of"),
                json::parse(R"([{"any_of": [{"path": "distill.teacher", "test": "starts_with", "prefix": "zoo:"}]}])"));
}

// A value of the field `c` tests that makes `c` hold (a teacher and feature pairs for the strings).
json holding_value(const FieldSpec::Condition& c) {
  switch (c.test) {
    case FieldSpec::Condition::Test::one_of:
      return c.values.front();
    case FieldSpec::Condition::Test::above:
      return find_field(c.path)->kind == FieldSpec::Kind::integer ? json(static_cast<int64_t>(c.bound) + 1)
                                                                  : json(c.bound + 1);
    case FieldSpec::Condition::Test::non_empty:
      return c.path == "distill.teacher" ? "zoo:teacher" : "1:8";
    case FieldSpec::Condition::Test::starts_with:
      return c.prefix + "teacher";
    case FieldSpec::Condition::Test::not_starts_with:
      return "run:teacher";
  }
  return nullptr;
}

// Every conditional field applies under some valid config: the first condition of each of its
// clauses made to hold.
// A condition that can never hold would grey a field out for good.
TEST(ConfigSchema, EveryConditionalFieldAppliesSomewhere) {
  for (const FieldSpec& f : experiment_schema()) {
    if (f.applies_when.empty())
      continue;
    json cfg = json::object();
    for (const auto& any : f.applies_when) {
      const FieldSpec::Condition& c = any.front();
      std::string pointer = "/" + c.path;
      std::replace(pointer.begin(), pointer.end(), '.', '/');
      cfg[json::json_pointer(pointer)] = holding_value(c);
    }
    EXPECT_TRUE(field_applies(f, cfg)) << f.path << " in " << cfg.dump();
    EXPECT_EQ(why_not_applies(f, cfg), "") << f.path;
    // Valid but for the files a dataset or model kind then requires (data.path for folder, ...).
    std::istringstream problems(problems_of(cfg));
    for (std::string line; std::getline(problems, line);)
      EXPECT_NE(line.find(": required when "), std::string::npos) << f.path << " in " << cfg.dump() << ": " << line;
  }
}

// The presets set nothing that does nothing: lathe-cli validate prints no warning for any of them.
TEST(ConfigSchema, PresetsSetNoUnusedField) {
  for (const auto& e : fs::directory_iterator(LATHE_SOURCE_DIR "/experiments")) {
    if (e.path().extension() != ".json")
      continue;
    const auto unused = unused_fields(load_config_file(e.path().string()));
    EXPECT_TRUE(unused.empty()) << e.path() << ": " << (unused.empty() ? "" : unused.front());
  }
}

TEST(ValidateConfig, FillsEveryDefault) {
  const json out = validate_config(json::object());
  for (const FieldSpec& f : experiment_schema())
    EXPECT_EQ(at_path(out, f.path), f.default_value) << f.path;
  EXPECT_EQ(out.at("name"), "experiment");
  EXPECT_EQ(out.at("train").at("epochs"), 5);
  EXPECT_EQ(out.at("train").at("optimizer").at("momentum"), 0.9);
  EXPECT_TRUE(out.at("train").at("optimizer").at("lr").is_null());
  EXPECT_EQ(out.at("quant").at("granularity"), "per-channel");
  EXPECT_EQ(out.at("cost").at("instance"), "local");
  // Given values are kept, and validating twice changes nothing.
  const json in = {{"name", "x"}, {"train", {{"epochs", 2}, {"optimizer", {{"lr", 0.1}}}}}};
  const json once = validate_config(in);
  EXPECT_EQ(once.at("train").at("epochs"), 2);
  EXPECT_EQ(once.at("train").at("optimizer").at("lr"), 0.1);
  EXPECT_EQ(once.at("train").at("batch_size"), 128);
  EXPECT_EQ(validate_config(once), once);
}

TEST(ValidateConfig, UnknownKeysNameTheClosestAndTheAllowed) {
  std::string msg = problems_of({{"nmae", "x"}});
  EXPECT_HAS(msg, "nmae: unknown key; did you mean \"name\"?");
  EXPECT_HAS(msg, "Allowed keys at the top level: \"name\", \"seed\"");
  msg = problems_of({{"train", {{"optimzer", {{"lr", 0.1}}}}}});
  EXPECT_HAS(msg, "train.optimzer: unknown key; did you mean \"optimizer\"?");
  EXPECT_HAS(msg, "Allowed keys in train: \"epochs\"");
  msg = problems_of({{"train", {{"optimizer", {{"learning_rate", 0.1}}}}}});
  EXPECT_HAS(msg, "train.optimizer.learning_rate: unknown key");
  EXPECT_HAS(msg, "\"lr\", \"momentum\"");
  EXPECT_EQ(msg.find("did you mean"), std::string::npos) << "nothing is close to learning_rate: " << msg;
}

TEST(ValidateConfig, WrongTypesSayWhatIsExpected) {
  EXPECT_HAS(problems_of({{"train", {{"epochs", 1.5}}}}),
             "train.epochs: expected an integer from 1 to 10000, got 1.5 (a number)");
  EXPECT_HAS(problems_of({{"name", 3}}), "name: expected a string, got 3 (an integer)");
  EXPECT_HAS(problems_of({{"data", {{"augment", {{"hflip", "yes"}}}}}}),
             "data.augment.hflip: expected true or false, got \"yes\" (a string)");
  EXPECT_HAS(problems_of({{"train", {{"optimizer", {{"momentum", "0.9"}}}}}}),
             "train.optimizer.momentum: expected a number >= 0 and < 1, got \"0.9\" (a string)");
  EXPECT_HAS(problems_of({{"train", 5}}), "train: expected an object with keys \"epochs\"");
  EXPECT_HAS(problems_of({{"seed", nullptr}}), "seed: expected an integer >= 0, got null");
  EXPECT_HAS(problems_of({{"model", {{"zoo", "custom"}, {"layers", {{"type", "relu"}}}}}}),
             "model.layers: expected an array of objects");
  EXPECT_HAS(problems_of({{"model", {{"zoo", "custom"}, {"layers", json::array({{{"out", 3}}})}}}}),
             "model.layers[0]: needs a string \"type\"");
  EXPECT_HAS(problems_of({{"model", {{"zoo", "custom"}, {"layers", json::array({3})}}}}),
             "model.layers[0]: expected an object");
  EXPECT_THROW(validate_config(json::array()), ConfigError);
  // An integral float is an integer (tools that write JSON from Python do this).
  const json out = validate_config({{"train", {{"epochs", 7.0}}}});
  EXPECT_TRUE(out.at("train").at("epochs").is_number_integer());
  EXPECT_EQ(out.at("train").at("epochs"), 7);
  // A number field takes an integer; null only where the default is null.
  EXPECT_EQ(problems_of({{"train", {{"optimizer", {{"lr", 1}}}}}}), "");
  EXPECT_EQ(problems_of({{"train", {{"optimizer", {{"lr", nullptr}}}}}}), "");
}

TEST(ValidateConfig, OutOfRangeValuesShowTheRange) {
  EXPECT_HAS(problems_of({{"train", {{"optimizer", {{"lr", 0}}}}}}),
             "train.optimizer.lr: 0 is out of range; allowed: a number > 0 and <= 10, or null for the default");
  EXPECT_HAS(problems_of({{"train", {{"optimizer", {{"lr", 10.5}}}}}}), "train.optimizer.lr: 10.5 is out of range");
  EXPECT_EQ(problems_of({{"train", {{"optimizer", {{"lr", 10}}}}}}), "");
  EXPECT_HAS(problems_of({{"train", {{"optimizer", {{"momentum", 1}}}}}}),
             "train.optimizer.momentum: 1 is out of range; allowed: a number >= 0 and < 1");
  EXPECT_EQ(problems_of({{"train", {{"optimizer", {{"momentum", 0}}}}}}), "");
  EXPECT_HAS(problems_of({{"data", {{"augment", {{"shift_px", 9}}}}}}),
             "data.augment.shift_px: 9 is out of range; allowed: an integer from 0 to 8");
  EXPECT_EQ(problems_of({{"data", {{"augment", {{"shift_px", 8}}}}}}), "");
  EXPECT_HAS(problems_of({{"seed", -1}}), "seed: -1 is out of range; allowed: an integer >= 0");
  EXPECT_HAS(problems_of({{"train", {{"schedule", {{"gamma", 0}}}}}}), "a number > 0 and <= 1");
  EXPECT_EQ(problems_of({{"train", {{"schedule", {{"gamma", 1}}}}}}), "");
  EXPECT_HAS(problems_of({{"train", {{"optimizer", {{"eps", 0}}}}}}), "train.optimizer.eps: 0 is out of range");
  EXPECT_HAS(problems_of({{"train", {{"batch_size", 0}}}}), "an integer from 1 to 65536");
}

TEST(ValidateConfig, BadChoicesListTheChoices) {
  EXPECT_HAS(problems_of({{"train", {{"optimizer", {{"type", "adam"}}}}}}),
             "train.optimizer.type: \"adam\" is not one of \"sgd\", \"adamw\"; did you mean \"adamw\"?");
  EXPECT_HAS(problems_of({{"model", {{"zoo", "resnet50"}}}}),
             "model.zoo: \"resnet50\" is not one of \"mlp\", \"cnn\", \"teacher\", \"student\", \"custom\"");
  EXPECT_HAS(problems_of({{"compute", {{"backend", 1}}}}), "compute.backend: 1 is not one of \"auto\"");
}

// compute.* of data-parallel runs (lathe-cli): bad values name the field and what is allowed.
TEST(ValidateConfig, ComputeFieldsOfDataParallelRuns) {
  EXPECT_HAS(problems_of({{"compute", {{"devices", 0}}}}), "compute.devices: ");
  EXPECT_HAS(problems_of({{"compute", {{"devices", 65}}}}), "compute.devices: ");
  EXPECT_HAS(problems_of({{"compute", {{"devices", 65}}}}), "64");
  EXPECT_HAS(problems_of({{"compute", {{"devices", "two"}}}}), "compute.devices: ");
  EXPECT_HAS(problems_of({{"compute", {{"timeout_s", 0}}}}), "compute.timeout_s: ");
  EXPECT_HAS(problems_of({{"compute", {{"bucket_mb", -1}}}}), "compute.bucket_mb: ");
  EXPECT_HAS(problems_of({{"compute", {{"rendezvous", 3}}}}), "compute.rendezvous: ");
  EXPECT_HAS(problems_of({{"compute", {{"rendezvous_id", false}}}}), "compute.rendezvous_id: ");
  const ExperimentConfig c = parse_experiment(validate_config(
      {{"compute",
        {{"devices", 4}, {"rendezvous", "redis://h:1"}, {"timeout_s", 5}, {"bucket_mb", 1}, {"rendezvous_id", "j"}}}}));
  EXPECT_EQ(c.compute.devices, 4);
  EXPECT_EQ(c.compute.rendezvous, "redis://h:1");
  EXPECT_EQ(c.compute.timeout_s, 5.0);
  EXPECT_EQ(c.compute.bucket_mb, 1.0);
  EXPECT_EQ(c.compute.rendezvous_id, "j");
}

TEST(ValidateConfig, UnsupportedKnobsOnlyAcceptTheirDefault) {
  EXPECT_TRUE(problems_of({{"compute", {{"devices", 2}}}}).empty());  // supported now
  // Supported since #15: 16-bit gradients and ZeRO-1.
  EXPECT_TRUE(problems_of({{"compute", {{"grad_compression", "bf16"}, {"shard_optimizer", true}}}}).empty());
  EXPECT_HAS(problems_of({{"compute", {{"grad_compression", "int8"}}}}), "compute.grad_compression: ");
  EXPECT_TRUE(problems_of({{"cost", {{"interruptions_per_hour", 0.05}}}}).empty());  // supported now
  // Their defaults, spelled out, are fine (a form writes every field).
  EXPECT_EQ(problems_of({{"prune", {{"method", "none"}, {"ratio", 0.5}, {"scope", "global"}}},
                         {"quant", {{"mode", "none"}}},
                         {"distill", {{"temperature", 4.0}}},
                         {"compute", {{"devices", 1}}},
                         {"train", {{"precision", "fp32"}}}}),
            "");
  // A bad value in an unsupported field reports the type/range problem, once.
  const std::string msg = problems_of({{"prune", {{"ratio", 2}}}});
  EXPECT_HAS(msg, "prune.ratio: 2 is out of range");
  EXPECT_EQ(msg.find("pruning lands"), std::string::npos) << msg;
}

TEST(ValidateConfig, CrossFieldRules) {
  EXPECT_HAS(problems_of({{"model", {{"zoo", "custom"}}}}), "model.layers: required when model.zoo is \"custom\"");
  EXPECT_HAS(problems_of({{"model", {{"layers", json::array({{{"type", "relu"}}})}}}}),
             "model.layers: only used when model.zoo is \"custom\"");
  EXPECT_EQ(problems_of({{"model",
                          {{"zoo", "custom"},
                           {"layers", json::array({{{"type", "flatten"}}, {{"type", "linear"}, {"out", 10}}})}}}}),
            "");
  // The layer list is checked against Fashion-MNIST's images: a linear layer on 28x28 images
  // without a flatten cannot work, and is refused here rather than mid-run.
  EXPECT_HAS(
      problems_of({{"model", {{"zoo", "custom"}, {"layers", json::array({{{"type", "linear"}, {"out", 10}}})}}}}),
      "model.layers[0]: linear needs a flat input");
  const std::string msg = problems_of({{"data", {{"dataset", "idx"}, {"train_images", "a.idx"}}}});
  EXPECT_HAS(msg, "data.train_labels: required when data.dataset is \"idx\"");
  EXPECT_HAS(msg, "data.test_images: required");
  EXPECT_EQ(msg.find("data.train_images"), std::string::npos) << msg;
  EXPECT_HAS(problems_of({{"data", {{"test_labels", "t.idx"}}}}),
             "data.test_labels: only used when data.dataset is \"idx\"");
}

TEST(ValidateConfig, InstanceMustBeInThePriceCatalog) {
  const std::string msg = problems_of({{"cost", {{"instance", "p3.2xlarg"}}}});
  EXPECT_HAS(msg, "cost.instance: \"p3.2xlarg\" is not in the price catalog");
  EXPECT_HAS(msg, "\"local\"");
  EXPECT_HAS(msg, "\"p4d.24xlarge\"");
  EXPECT_HAS(msg, "did you mean \"p3.2xlarge\"?");
  EXPECT_EQ(problems_of({{"cost", {{"instance", "p5.48xlarge"}, {"pricing", "spot"}}}}), "");
}

TEST(ValidateConfig, CollectsAllProblemsOnePerLine) {
  const std::string msg = problems_of({{"seed", -3},
                                       {"train", {{"epochs", 0}, {"optimizer", {{"type", "rmsprop"}}}}},
                                       {"prune", {{"method", "magnitude"}}},
                                       {"bogus", 1}});
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 4) << msg;
  EXPECT_HAS(msg, "bogus: unknown key");
  EXPECT_HAS(msg, "seed: -3");
  EXPECT_HAS(msg, "train.epochs: 0 is out of range");
  EXPECT_HAS(msg, "train.optimizer.type: \"rmsprop\"");
  EXPECT_HAS(msg, "prune.method: \"magnitude\" is not one of");
}

TEST(ApplyOverride, SetsValuesParsedAsJsonOrText) {
  json cfg = json::object();
  apply_override(cfg, "train.optimizer.lr=0.1");
  apply_override(cfg, "train.epochs=3");
  apply_override(cfg, "data.augment.hflip=true");
  apply_override(cfg, "name=my run");
  apply_override(cfg, "description=2024");  // a string field keeps the text, not the number
  apply_override(cfg, "cost.instance=p3.2xlarge");
  apply_override(cfg, "data.path=/tmp/a=b");  // only the first '=' splits
  apply_override(cfg, "model.zoo=custom");
  apply_override(cfg, R"(model.layers=[{"type":"flatten"},{"type":"linear","out":10}])");
  EXPECT_EQ(cfg["train"]["optimizer"]["lr"], 0.1);
  EXPECT_EQ(cfg["train"]["epochs"], 3);
  EXPECT_EQ(cfg["data"]["augment"]["hflip"], true);
  EXPECT_EQ(cfg["name"], "my run");
  EXPECT_EQ(cfg["description"], "2024");
  EXPECT_EQ(cfg["cost"]["instance"], "p3.2xlarge");
  EXPECT_EQ(cfg["data"]["path"], "/tmp/a=b");
  EXPECT_EQ(cfg["model"]["layers"][1]["out"], 10);
  EXPECT_EQ(problems_of(cfg), "");
  // Overrides replace what the file had; a bad value is caught by validation, not by the override.
  apply_override(cfg, "train.epochs=lots");
  EXPECT_EQ(cfg["train"]["epochs"], "lots");
  EXPECT_HAS(problems_of(cfg), "train.epochs: expected an integer");
}

TEST(ApplyOverride, UnknownKeysListCloseMatches) {
  json cfg = json::object();
  try {
    apply_override(cfg, "train.optimiser.lr=0.1");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(e.what(), "train.optimiser.lr: no such config field; close matches: \"train.optimizer.lr\"");
  }
  try {
    apply_override(cfg, "train.learning_rate=0.1");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(e.what(),
               "fields in train: \"train.epochs\", \"train.batch_size\", \"train.precision\", \"train.optimizer.*\"");
  }
  EXPECT_THROW(apply_override(cfg, "train"), ConfigError);
  EXPECT_THROW(apply_override(cfg, "=3"), ConfigError);
  EXPECT_THROW(apply_override(cfg, "train=3"), ConfigError);  // a section, not a field
  json flat = {{"train", 5}};
  EXPECT_THROW(apply_override(flat, "train.epochs=3"), ConfigError);
  EXPECT_TRUE(cfg.empty()) << "a failed override must not change the config";
}

class ConfigFile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    m_path = (fs::temp_directory_path() / ("lathe_config_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json"))
                 .string();
    std::ofstream(m_path) << text;
    return m_path;
  }
  void TearDown() override {
    if (!m_path.empty())
      fs::remove(m_path);
  }
  std::string m_path;
};

TEST_F(ConfigFile, LoadsAnObject) {
  const json cfg = load_config_file(write(R"({"name": "a", "train": {"epochs": 2}})"));
  EXPECT_EQ(cfg.at("train").at("epochs"), 2);
}

TEST_F(ConfigFile, SyntaxErrorsGiveLineAndColumn) {
  const std::string path = write("{\n  \"name\": \"x\",\n  \"seed\": ,\n}\n");
  try {
    load_config_file(path);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(e.what(), path + ":3:11: JSON syntax error");
  }
}

TEST_F(ConfigFile, MissingFileAndNonObjectAreRejected) {
  EXPECT_THROW(load_config_file("/no/such/config.json"), ConfigError);
  try {
    load_config_file(write("[1, 2]"));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_HAS(e.what(), "expected a JSON object at the top level, got an array");
  }
}

ExperimentConfig test_config_with(const std::vector<std::string>& sets) {
  json cfg = json::object();
  for (const std::string& s : sets)
    apply_override(cfg, s);
  return parse_experiment(validate_config(cfg));
}

TEST(ParseExperiment, LearningRateDefaultsPerModel) {
  const std::vector<std::pair<std::string, double>> cases{
      {"mlp", 0.05}, {"student", 0.05}, {"cnn", 0.02}, {"teacher", 0.02}, {"custom", 0.01}};
  for (const auto& [zoo, lr] : cases) {
    json cfg = {{"model", {{"zoo", zoo}}}};
    if (zoo == "custom")
      cfg["model"]["layers"] = json::array({{{"type", "flatten"}}});
    const ExperimentConfig c = parse_experiment(validate_config(cfg));
    EXPECT_EQ(c.train.optimizer.lr, lr) << zoo;
    EXPECT_TRUE(c.train.optimizer.lr_is_default) << zoo;
    EXPECT_EQ(enum_name(c.model.zoo), zoo);
    EXPECT_TRUE(c.raw.at("train").at("optimizer").at("lr").is_null());
  }
  const ExperimentConfig c =
      parse_experiment(validate_config({{"model", {{"zoo", "cnn"}}}, {"train", {{"optimizer", {{"lr", 0.3}}}}}}));
  EXPECT_EQ(c.train.optimizer.lr, 0.3);
  EXPECT_FALSE(c.train.optimizer.lr_is_default);
}

TEST(ParseExperiment, FillsTheTypedStruct) {
  json cfg = json::object();
  for (const char* s :
       {"name=cnn-a", "seed=7", "data.augment.shift_px=2", "data.augment.hflip=true", "data.train_subset=1000",
        "train.batch_size=64", "train.optimizer.type=adamw", "train.optimizer.weight_decay=0.01",
        "train.schedule.type=cosine", "train.schedule.warmup_epochs=0.5", "compute.backend=reference",
        "compute.grad_compression=bf16", "compute.shard_optimizer=true", "compute.telemetry_s=0.25",
        "cost.pricing=spot", "cost.instance=g4dn.xlarge", "output.dir=/tmp/runs"})
    apply_override(cfg, s);
  const ExperimentConfig c = parse_experiment(validate_config(cfg));
  EXPECT_EQ(c.name, "cnn-a");
  EXPECT_EQ(c.seed, 7u);
  EXPECT_EQ(c.data.dataset, DatasetKind::fashion_mnist);
  EXPECT_EQ(c.data.augment.shift_px, 2);
  EXPECT_TRUE(c.data.augment.hflip);
  EXPECT_EQ(c.data.augment.strength, 1.0);
  EXPECT_EQ(c.data.train_subset, 1000);
  EXPECT_EQ(c.data.prefetch, 2);
  EXPECT_EQ(c.train.batch_size, 64);
  EXPECT_EQ(c.train.epochs, 5);
  EXPECT_EQ(c.train.precision, Precision::fp32);
  EXPECT_EQ(c.train.optimizer.type, OptimizerType::adamw);
  EXPECT_EQ(c.train.optimizer.weight_decay, 0.01);
  EXPECT_EQ(c.train.optimizer.beta2, 0.999);
  EXPECT_EQ(c.train.optimizer.eps, 1e-8);
  EXPECT_EQ(c.train.schedule.type, ScheduleType::cosine);
  EXPECT_EQ(c.train.schedule.warmup_epochs, 0.5);
  EXPECT_TRUE(c.train.save_model);
  EXPECT_EQ(c.compute.backend, BackendChoice::reference);
  EXPECT_EQ(c.compute.devices, 1);
  EXPECT_EQ(c.compute.grad_compression, GradCompression::bf16);
  EXPECT_TRUE(c.compute.shard_optimizer);
  EXPECT_EQ(c.compute.telemetry_s, 0.25);
  EXPECT_EQ(c.cost.pricing, Pricing::spot);
  EXPECT_EQ(c.cost.instance, "g4dn.xlarge");
  EXPECT_EQ(c.prune.method, PruneMethod::none);
  EXPECT_EQ(c.quant.calib_samples, 512);
  EXPECT_EQ(c.checkpoint.every_min, 30.0);
  EXPECT_EQ(c.checkpoint.every_steps, 0);
  EXPECT_EQ(c.checkpoint.keep, 3);
  EXPECT_EQ(c.checkpoint.dir, "");
  EXPECT_EQ(c.cost.notice_provider, "none");
  EXPECT_EQ(c.cost.notice_poll_s, 5.0);
  EXPECT_EQ(c.cost.notice_window_s(), 120.0);
  // Checkpoints are supported now: their knobs take any value in range.
  const ExperimentConfig k = test_config_with({"checkpoint.every_steps=50", "checkpoint.keep=5",
                                               "cost.notice_provider=gcp", "cost.notice_url=http://127.0.0.1:9"});
  EXPECT_EQ(k.checkpoint.every_steps, 50);
  EXPECT_EQ(k.checkpoint.keep, 5);
  EXPECT_EQ(k.cost.notice_window_s(), 30.0);
  EXPECT_EQ(k.cost.notice_url, "http://127.0.0.1:9");
  EXPECT_EQ(c.output.dir, "/tmp/runs");
  EXPECT_EQ(c.raw, validate_config(cfg));
  // Unvalidated input is validated again, not trusted.
  EXPECT_THROW(parse_experiment({{"train", {{"epochs", -1}}}}), ConfigError);
}

// A small valid ONNX classifier for 28x28 images (flatten, linear 10), written once per process.
std::string tiny_onnx_file() {
  static const std::string path = [] {
    const std::string p = (fs::temp_directory_path() / ("lathe-config-test-" + std::to_string(::getpid()) + ".onnx"));
    auto m =
        build_model_from_layers(json::parse(R"([{"type": "flatten"}, {"type": "linear", "out": 10}])"), {1, 28, 28});
    ReferenceBackend be;
    Rng rng(0);
    m->create_params(be, DType::f32, rng);
    export_onnx(*m, be, p);
    std::atexit([] {
      std::error_code ec;
      fs::remove(fs::temp_directory_path() / ("lathe-config-test-" + std::to_string(::getpid()) + ".onnx"), ec);
    });
    return p;
  }();
  return path;
}

TEST(ValidateConfig, OnnxModelRules) {
  EXPECT_HAS(problems_of({{"model", {{"zoo", "onnx"}}}}), "model.onnx: required when model.zoo is \"onnx\"");
  EXPECT_HAS(problems_of({{"model", {{"zoo", "mlp"}, {"onnx", tiny_onnx_file()}}}}),
             "model.onnx: only used when model.zoo is \"onnx\"");
  EXPECT_HAS(problems_of({{"model", {{"onnx", "/nonexistent/m.onnx"}}}}),
             "model.onnx: /nonexistent/m.onnx: cannot open the ONNX file");
  // model.onnx alone implies model.zoo = "onnx"; the file is imported and checked against the data.
  const json ok = validate_config({{"model", {{"onnx", tiny_onnx_file()}}}});
  EXPECT_EQ(ok["model"]["zoo"], "onnx");
  EXPECT_EQ(parse_experiment(ok).model.onnx, tiny_onnx_file());
  EXPECT_EQ(problems_of({{"model", {{"onnx", tiny_onnx_file()}}}, {"data", {{"dataset", "fashion-mnist"}}}}), "");
  // A model for 3x8x8 images does not take Fashion-MNIST's 1x28x28: refused at validation.
  const std::string rgb = (fs::temp_directory_path() / ("lathe-config-rgb-" + std::to_string(::getpid()) + ".onnx"));
  auto m = build_model_from_layers(json::parse(R"([{"type": "flatten"}, {"type": "linear", "out": 10}])"), {3, 8, 8});
  ReferenceBackend be;
  Rng rng(0);
  m->create_params(be, DType::f32, rng);
  export_onnx(*m, be, rgb);
  EXPECT_HAS(problems_of({{"model", {{"onnx", rgb}}}}),
             "the ONNX model takes input [3, 8, 8] per sample, the dataset's images are [1, 28, 28]");
  fs::remove(rgb);
}

TEST(ValidateConfig, NpzAndFolderDataNeedAPathAndGreyOrRgb) {
  for (const char* kind : {"npz", "folder"}) {
    json cfg = json::object();
    apply_override(cfg, std::string("data.dataset=") + kind);
    try {
      validate_config(cfg);
      ADD_FAILURE() << kind << " without data.path was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("data.path: required when data.dataset is \"" + std::string(kind)),
                std::string::npos)
          << e.what();
    }
  }
  json cfg = json::object();
  apply_override(cfg, "data.dataset=folder");
  apply_override(cfg, "data.path=d");
  apply_override(cfg, "data.channels=2");
  EXPECT_THROW(parse_experiment(validate_config(cfg)), ConfigError);
  apply_override(cfg, "data.channels=1");
  const ExperimentConfig c = parse_experiment(validate_config(cfg));
  EXPECT_EQ(c.data.channels, 1);
  EXPECT_EQ(c.data.image_size, 32);
  EXPECT_EQ(c.data.path, "d");
}

TEST(ParseExperiment, EverySupportedChoiceMapsToItsEnum) {
  // If someone adds a choice to the schema without an enum value, this fails.
  for (const FieldSpec& f : experiment_schema()) {
    if (f.kind != FieldSpec::Kind::enumeration || !f.supported)
      continue;
    for (const std::string& choice : f.choices) {
      json cfg = json::object();
      apply_override(cfg, f.path + "=" + choice);
      if (f.path == "model.zoo" && choice == "custom")
        cfg["model"]["layers"] = json::array({{{"type", "flatten"}}, {{"type", "linear"}, {"out", 10}}});
      if (f.path == "model.zoo" && choice == "onnx")
        cfg["model"]["onnx"] = tiny_onnx_file();
      if (f.path == "data.dataset" && choice == "idx")
        for (const char* k : {"train_images", "train_labels", "test_images", "test_labels"})
          cfg["data"][k] = "f";
      if (f.path == "data.dataset" && (choice == "npz" || choice == "folder"))
        cfg["data"]["path"] = "d";
      const ExperimentConfig c = parse_experiment(validate_config(cfg));
      std::string_view got;
      if (f.path == "data.dataset")
        got = enum_name(c.data.dataset);
      else if (f.path == "model.zoo")
        got = enum_name(c.model.zoo);
      else if (f.path == "train.optimizer.type")
        got = enum_name(c.train.optimizer.type);
      else if (f.path == "train.schedule.type")
        got = enum_name(c.train.schedule.type);
      else if (f.path == "compute.backend")
        got = enum_name(c.compute.backend);
      else if (f.path == "compute.grad_compression")
        got = enum_name(c.compute.grad_compression);
      else if (f.path == "cost.pricing")
        got = enum_name(c.cost.pricing);
      else if (f.path == "train.precision")
        got = enum_name(c.train.precision);
      else if (f.path == "prune.method")
        got = enum_name(c.prune.method);
      else if (f.path == "prune.scope")
        got = enum_name(c.prune.scope);
      else if (f.path == "prune.schedule")
        got = enum_name(c.prune.schedule);
      else if (f.path == "quant.mode")
        got = enum_name(c.quant.mode);
      else if (f.path == "quant.calibration")
        got = enum_name(c.quant.calibration);
      else if (f.path == "quant.granularity")
        got = enum_name(c.quant.granularity);
      else if (f.path == "cost.notice_provider")
        got = c.cost.notice_provider;
      else if (c.stage_configs.count(f.section))  // a stage with its typed config of its own tests its enums
        continue;
      else
        ADD_FAILURE() << "no typed field checked for " << f.path;
      EXPECT_EQ(got, choice) << f.path;
    }
  }
}

TEST(FlattenConfig, OneEntryPerSchemaField) {
  const json cfg = validate_config({{"model", {{"zoo", "cnn"}}}, {"name", "a b"}});
  const auto flat = flatten_config(cfg);
  EXPECT_EQ(flat.size(), experiment_schema().size());
  auto value = [&](const std::string& path) {
    for (const auto& [p, v] : flat)
      if (p == path)
        return v;
    return std::string("<missing>");
  };
  EXPECT_EQ(value("name"), "a b");
  EXPECT_EQ(value("model.zoo"), "cnn");
  EXPECT_EQ(value("model.layers"), "[]");
  EXPECT_EQ(value("train.optimizer.lr"), "null");
  EXPECT_EQ(value("train.epochs"), "5");
  EXPECT_EQ(value("train.save_model"), "true");
  EXPECT_EQ(value("train.optimizer.momentum"), "0.9");
  EXPECT_EQ(value("data.augment.hflip"), "false");
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

TEST(Presets, EveryExperimentFileValidatesAndParses) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(LATHE_SOURCE_DIR "/experiments")) {
    if (e.path().extension() != ".json")
      continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW(parse_experiment(validate_config(load_config_file(e.path().string()))));
    ++n;
  }
  EXPECT_GE(n, 10);
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

std::string parse_error_of(const std::string& text) {
  try {
    parse_config_text(text, "test.json");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ParseConfigText, DuplicateKeysAreRefusedWithTheirJsonPath) {
  EXPECT_EQ(parse_error_of(R"({"a": {"b": 1}, "c": [1, {"d": 2}]})"), "");
  EXPECT_HAS(parse_error_of(R"({"a": 1, "a": 2})"), "duplicate key \"a\" in the top-level object");
  EXPECT_HAS(parse_error_of(R"({"model": {"layers": [{"type": "relu"}, {"type": "relu", "type": "flatten"}]}})"),
             "duplicate key \"type\" in model.layers[1]");
  EXPECT_HAS(parse_error_of(R"({"x": [[1, 2], {"k": 1, "k": 1}]})"), "in x[1]");
  // The same key in sibling objects is not a duplicate.
  EXPECT_EQ(parse_error_of(R"({"p": {"k": 1}, "q": {"k": 1}, "r": [{"k": 1}, {"k": 2}]})"), "");
}

TEST(ParseConfigText, SyntaxAndRangeErrorsAreConfigErrorsWithThePlace) {
  EXPECT_HAS(parse_error_of("{\n  \"a\": ,\n}"), "test.json:2:8: JSON syntax error");
  const std::string big = parse_error_of(R"({"lr": 1e999})");
  EXPECT_HAS(big, "test.json");
  EXPECT_HAS(big, "1e999");
  EXPECT_EQ(big.find("json.exception"), std::string::npos) << big;
  EXPECT_HAS(parse_error_of("[1]"), "expected a JSON object at the top level");
}

TEST(ApplyOverride, RefusesInvalidUtf8AndUnrepresentableNumbers) {
  json cfg = json::object();
  for (const std::string bad : {std::string("name=a\xff"), std::string("name=\xc0\xaf"),
                                std::string("name=\xed\xa0\x80"), std::string("name=\xe2\x82")}) {
    try {
      apply_override(cfg, bad);
      ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const ConfigError& e) {
      EXPECT_HAS(e.what(), "not valid UTF-8");
    }
  }
  EXPECT_NO_THROW(apply_override(cfg, "name=caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  try {
    apply_override(cfg, "train.optimizer.lr=1e999");
    ADD_FAILURE() << "accepted 1e999";
  } catch (const ConfigError& e) {
    EXPECT_HAS(e.what(), "train.optimizer.lr");
  }
}

}  // namespace
}  // namespace lathe
