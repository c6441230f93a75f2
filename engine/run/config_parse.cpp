// The typed view of a validated config (parse_experiment; each stage parses its own section), enum
// spellings, and flatten_config.
#include <algorithm>
#include <array>

#include "engine/core/error.h"
#include "engine/run/config.h"
#include "engine/run/stage_registry.h"

namespace lathe {

namespace {

using nlohmann::json;

// Each enum's schema spellings, indexed by the enum value.
constexpr std::array<std::string_view, 4> kDatasetNames{"fashion-mnist", "idx", "npz", "folder"};
constexpr std::array<std::string_view, 6> kZooNames{"mlp", "cnn", "teacher", "student", "custom", "onnx"};
constexpr std::array<std::string_view, 3> kPrecisionNames{"fp32", "bf16", "f16"};
constexpr std::array<std::string_view, 2> kOptimizerNames{"sgd", "adamw"};
constexpr std::array<std::string_view, 3> kScheduleNames{"constant", "step", "cosine"};
constexpr std::array<std::string_view, 4> kBackendNames{"auto", "cpu", "cuda", "reference"};
constexpr std::array<std::string_view, 3> kCompressionNames{"none", "fp16", "bf16"};
constexpr std::array<std::string_view, 2> kPricingNames{"on-demand", "spot"};
constexpr std::array<std::string_view, 5> kPruneMethodNames{"none", "l1-unstructured", "l1-structured", "l2-structured",
                                                            "nm"};
constexpr std::array<std::string_view, 2> kPruneScopeNames{"global", "layer"};
constexpr std::array<std::string_view, 2> kPruneScheduleNames{"one-shot", "agp"};
constexpr std::array<std::string_view, 4> kQuantModeNames{"none", "ptq-static", "ptq-dynamic", "qat"};
constexpr std::array<std::string_view, 4> kCalibrationNames{"minmax", "percentile", "entropy", "mse"};
constexpr std::array<std::string_view, 2> kGranularityNames{"per-tensor", "per-channel"};

template <class E, size_t N>
E parse_enum(const json& v, const std::array<std::string_view, N>& names, const char* path) {
  const std::string s = v.get<std::string>();
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s)
      return static_cast<E>(i);
  // The schema accepted a choice that has no enum value: a schema/struct mismatch, not a user error.
  LATHE_FAIL(path, ": choice \"", s, "\" has no C++ enum value");
}

template <size_t N>
std::string_view name_of(size_t i, const std::array<std::string_view, N>& names) {
  return i < N ? names[i] : std::string_view("?");
}

void flatten_into(const json& v, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [key, child] : v.items())
      flatten_into(child, path.empty() ? key : path + "." + key, out);
    return;
  }
  out.emplace_back(path, v.is_string() ? v.get<std::string>() : v.dump());
}

}  // namespace

std::string_view enum_name(DatasetKind v) { return name_of(static_cast<size_t>(v), kDatasetNames); }
std::string_view enum_name(ModelZoo v) { return name_of(static_cast<size_t>(v), kZooNames); }
std::string_view enum_name(Precision v) { return name_of(static_cast<size_t>(v), kPrecisionNames); }
std::string_view enum_name(OptimizerType v) { return name_of(static_cast<size_t>(v), kOptimizerNames); }
std::string_view enum_name(ScheduleType v) { return name_of(static_cast<size_t>(v), kScheduleNames); }
std::string_view enum_name(BackendChoice v) { return name_of(static_cast<size_t>(v), kBackendNames); }
std::string_view enum_name(GradCompression v) { return name_of(static_cast<size_t>(v), kCompressionNames); }
std::string_view enum_name(Pricing v) { return name_of(static_cast<size_t>(v), kPricingNames); }
std::string_view enum_name(PruneMethod v) { return name_of(static_cast<size_t>(v), kPruneMethodNames); }
std::string_view enum_name(PruneScope v) { return name_of(static_cast<size_t>(v), kPruneScopeNames); }
std::string_view enum_name(PruneSchedule v) { return name_of(static_cast<size_t>(v), kPruneScheduleNames); }
std::string_view enum_name(QuantMode v) { return name_of(static_cast<size_t>(v), kQuantModeNames); }
std::string_view enum_name(QuantCalibration v) { return name_of(static_cast<size_t>(v), kCalibrationNames); }
std::string_view enum_name(WeightGranularity v) { return name_of(static_cast<size_t>(v), kGranularityNames); }

void throw_no_enum_value(const char* path, const std::string& text) {
  // The schema accepted a choice that has no enum value: a schema/struct mismatch, not a user error.
  LATHE_FAIL(path, ": choice \"", text, "\" has no C++ enum value");
}

void throw_missing_stage_config(const std::string& section) {
  LATHE_FAIL("no typed config of section \"", section, "\": its stage's parse() did not store one");
}

double default_learning_rate(ModelZoo zoo) {
  switch (zoo) {
    case ModelZoo::mlp:
    case ModelZoo::student:
      return 0.05;
    case ModelZoo::cnn:
    case ModelZoo::teacher:
      return 0.02;
    case ModelZoo::custom:
    case ModelZoo::onnx:
      return 0.01;
  }
  return 0.01;
}

namespace {

void parse_data(const json& d, DataConfig& out) {
  out.dataset = parse_enum<DatasetKind>(d.at("dataset"), kDatasetNames, "data.dataset");
  out.path = d.at("path").get<std::string>();
  out.train_images = d.at("train_images").get<std::string>();
  out.train_labels = d.at("train_labels").get<std::string>();
  out.test_images = d.at("test_images").get<std::string>();
  out.test_labels = d.at("test_labels").get<std::string>();
  out.num_classes = d.at("num_classes").get<int>();
  out.image_size = d.at("image_size").get<int64_t>();
  out.channels = d.at("channels").get<int64_t>();
  if (out.channels != 1 && out.channels != 3)
    throw ConfigError("data.channels: " + std::to_string(out.channels) + " is not allowed; allowed: 1 (grey), 3 (RGB)");
  out.train_subset = d.at("train_subset").get<int64_t>();
  out.test_subset = d.at("test_subset").get<int64_t>();
  const json& a = d.at("augment");
  out.augment.shift_px = a.at("shift_px").get<int>();
  out.augment.hflip = a.at("hflip").get<bool>();
  out.augment.noise_std = a.at("noise_std").get<double>();
  out.augment.strength = a.at("strength").get<double>();
  out.prefetch = d.at("prefetch").get<int>();
}

void parse_model(const json& m, ModelConfig& out) {
  out.zoo = parse_enum<ModelZoo>(m.at("zoo"), kZooNames, "model.zoo");
  out.layers = m.at("layers");
  out.init_from = m.at("init_from").get<std::string>();
  out.onnx = m.at("onnx").get<std::string>();
}

/// train.*; the default learning rate depends on the model (`zoo`).
void parse_train(const json& t, ModelZoo zoo, TrainConfig& out) {
  out.epochs = t.at("epochs").get<int>();
  out.batch_size = t.at("batch_size").get<int>();
  out.precision = parse_enum<Precision>(t.at("precision"), kPrecisionNames, "train.precision");
  const json& ls = t.at("loss_scale");
  out.loss_scale.init = ls.at("init").get<double>();
  out.loss_scale.growth_factor = ls.at("growth_factor").get<double>();
  out.loss_scale.backoff_factor = ls.at("backoff_factor").get<double>();
  out.loss_scale.growth_interval = ls.at("growth_interval").get<int64_t>();
  const json& o = t.at("optimizer");
  out.optimizer.type = parse_enum<OptimizerType>(o.at("type"), kOptimizerNames, "train.optimizer.type");
  out.optimizer.lr_is_default = o.at("lr").is_null();
  out.optimizer.lr = o.at("lr").is_null() ? default_learning_rate(zoo) : o.at("lr").get<double>();
  out.optimizer.momentum = o.at("momentum").get<double>();
  out.optimizer.weight_decay = o.at("weight_decay").get<double>();
  out.optimizer.nesterov = o.at("nesterov").get<bool>();
  out.optimizer.beta1 = o.at("beta1").get<double>();
  out.optimizer.beta2 = o.at("beta2").get<double>();
  out.optimizer.eps = o.at("eps").get<double>();
  const json& s = t.at("schedule");
  out.schedule.type = parse_enum<ScheduleType>(s.at("type"), kScheduleNames, "train.schedule.type");
  out.schedule.warmup_epochs = s.at("warmup_epochs").get<double>();
  out.schedule.step_epochs = s.at("step_epochs").get<int64_t>();
  out.schedule.gamma = s.at("gamma").get<double>();
  out.schedule.min_lr = s.at("min_lr").get<double>();
  out.grad_accum = t.at("grad_accum").get<int>();
  out.threads = t.at("threads").get<int>();
  out.eval_every = t.at("eval_every").get<int64_t>();
  out.save_model = t.at("save_model").get<bool>();
}

void parse_compute(const json& cp, ComputeConfig& out) {
  out.backend = parse_enum<BackendChoice>(cp.at("backend"), kBackendNames, "compute.backend");
  out.devices = cp.at("devices").get<int>();
  out.rendezvous = cp.at("rendezvous").get<std::string>();
  out.timeout_s = cp.at("timeout_s").get<double>();
  out.bucket_mb = cp.at("bucket_mb").get<double>();
  out.rendezvous_id = cp.at("rendezvous_id").get<std::string>();
  out.grad_compression =
      parse_enum<GradCompression>(cp.at("grad_compression"), kCompressionNames, "compute.grad_compression");
  out.shard_optimizer = cp.at("shard_optimizer").get<bool>();
  out.telemetry_s = cp.at("telemetry_s").get<double>();
}

/// checkpoint.*, cost.*, output.*.
void parse_run_sections(const json& j, ExperimentConfig& c) {
  c.checkpoint.every_min = j.at("checkpoint").at("every_min").get<double>();
  c.checkpoint.every_steps = j.at("checkpoint").at("every_steps").get<int64_t>();
  c.checkpoint.keep = j.at("checkpoint").at("keep").get<int64_t>();
  c.checkpoint.dir = j.at("checkpoint").at("dir").get<std::string>();

  const json& cost = j.at("cost");
  c.cost.instance = cost.at("instance").get<std::string>();
  c.cost.pricing = parse_enum<Pricing>(cost.at("pricing"), kPricingNames, "cost.pricing");
  c.cost.interruptions_per_hour = cost.at("interruptions_per_hour").get<double>();
  c.cost.notice_provider = cost.at("notice_provider").get<std::string>();
  c.cost.notice_url = cost.at("notice_url").get<std::string>();
  c.cost.notice_poll_s = cost.at("notice_poll_s").get<double>();
  c.cost.notice_s = cost.at("notice_s").get<double>();
  c.cost.restart_s = cost.at("restart_s").get<double>();

  c.output.dir = j.at("output").at("dir").get<std::string>();
  c.output.onnx = j.at("output").at("onnx").get<bool>();
}

}  // namespace

ExperimentConfig parse_experiment(const json& validated) {
  const json j = validate_config(validated);
  ExperimentConfig c;
  c.name = j.at("name").get<std::string>();
  c.seed = j.at("seed").get<uint64_t>();
  c.description = j.at("description").get<std::string>();
  parse_data(j.at("data"), c.data);
  parse_model(j.at("model"), c.model);
  parse_train(j.at("train"), c.model.zoo, c.train);
  parse_compute(j.at("compute"), c.compute);
  // Each stage parses its own section (prune, distill, quant, ...): engine/run/stage.h.
  for (const auto& stage : stage_prototypes())
    stage->parse(j, c);
  parse_run_sections(j, c);
  c.raw = j;
  return c;
}

std::vector<std::pair<std::string, std::string>> flatten_config(const json& cfg) {
  std::vector<std::pair<std::string, std::string>> out;
  if (cfg.is_object())
    for (const auto& [key, child] : cfg.items())
      flatten_into(child, key, out);
  return out;
}

}  // namespace lathe
