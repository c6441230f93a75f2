// The typed view of a validated config (parse_experiment), enum spellings, and flatten_config.
#include <algorithm>
#include <array>

#include "engine/core/error.h"
#include "engine/run/config.h"

namespace lathe {

namespace {

using nlohmann::json;

// Each enum's schema spellings, indexed by the enum value.
constexpr std::array<std::string_view, 2> kDatasetNames{"fashion-mnist", "idx"};
constexpr std::array<std::string_view, 5> kZooNames{"mlp", "cnn", "teacher", "student", "custom"};
constexpr std::array<std::string_view, 3> kPrecisionNames{"fp32", "bf16", "f16"};
constexpr std::array<std::string_view, 2> kOptimizerNames{"sgd", "adamw"};
constexpr std::array<std::string_view, 3> kScheduleNames{"constant", "step", "cosine"};
constexpr std::array<std::string_view, 4> kBackendNames{"auto", "cpu", "cuda", "reference"};
constexpr std::array<std::string_view, 2> kCompressionNames{"none", "fp16"};
constexpr std::array<std::string_view, 2> kPricingNames{"on-demand", "spot"};

/// prune.exclude: comma-separated node names, spaces around them ignored, empty parts rejected.
std::vector<std::string> split_prune_exclude(const std::string& text) {
  std::vector<std::string> out;
  if (text.find_first_not_of(" ,") == std::string::npos)
    return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const size_t b = text.find_first_not_of(' ', at), e = text.find_last_not_of(' ', comma - 1);
    if (b >= comma || e == std::string::npos || e < b)
      throw ConfigError("prune.exclude: \"" + text + "\" has an empty name; allowed: node names separated by commas");
    out.push_back(text.substr(b, e - b + 1));
    at = comma + 1;
  }
  return out;
}

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

double default_learning_rate(ModelZoo zoo) {
  switch (zoo) {
    case ModelZoo::mlp:
    case ModelZoo::student:
      return 0.05;
    case ModelZoo::cnn:
    case ModelZoo::teacher:
      return 0.02;
    case ModelZoo::custom:
      return 0.01;
  }
  return 0.01;
}

ExperimentConfig parse_experiment(const json& validated) {
  const json j = validate_config(validated);
  ExperimentConfig c;
  c.name = j.at("name").get<std::string>();
  c.seed = j.at("seed").get<uint64_t>();
  c.description = j.at("description").get<std::string>();

  const json& d = j.at("data");
  c.data.dataset = parse_enum<DatasetKind>(d.at("dataset"), kDatasetNames, "data.dataset");
  c.data.path = d.at("path").get<std::string>();
  c.data.train_images = d.at("train_images").get<std::string>();
  c.data.train_labels = d.at("train_labels").get<std::string>();
  c.data.test_images = d.at("test_images").get<std::string>();
  c.data.test_labels = d.at("test_labels").get<std::string>();
  c.data.train_subset = d.at("train_subset").get<int64_t>();
  c.data.test_subset = d.at("test_subset").get<int64_t>();
  const json& a = d.at("augment");
  c.data.augment.shift_px = a.at("shift_px").get<int>();
  c.data.augment.hflip = a.at("hflip").get<bool>();
  c.data.augment.noise_std = a.at("noise_std").get<double>();
  c.data.augment.strength = a.at("strength").get<double>();
  c.data.prefetch = d.at("prefetch").get<int>();

  const json& m = j.at("model");
  c.model.zoo = parse_enum<ModelZoo>(m.at("zoo"), kZooNames, "model.zoo");
  c.model.layers = m.at("layers");
  c.model.init_from = m.at("init_from").get<std::string>();

  const json& t = j.at("train");
  c.train.epochs = t.at("epochs").get<int>();
  c.train.batch_size = t.at("batch_size").get<int>();
  c.train.precision = parse_enum<Precision>(t.at("precision"), kPrecisionNames, "train.precision");
  const json& ls = t.at("loss_scale");
  c.train.loss_scale.init = ls.at("init").get<double>();
  c.train.loss_scale.growth_factor = ls.at("growth_factor").get<double>();
  c.train.loss_scale.backoff_factor = ls.at("backoff_factor").get<double>();
  c.train.loss_scale.growth_interval = ls.at("growth_interval").get<int64_t>();
  const json& o = t.at("optimizer");
  c.train.optimizer.type = parse_enum<OptimizerType>(o.at("type"), kOptimizerNames, "train.optimizer.type");
  c.train.optimizer.lr_is_default = o.at("lr").is_null();
  c.train.optimizer.lr = o.at("lr").is_null() ? default_learning_rate(c.model.zoo) : o.at("lr").get<double>();
  c.train.optimizer.momentum = o.at("momentum").get<double>();
  c.train.optimizer.weight_decay = o.at("weight_decay").get<double>();
  c.train.optimizer.nesterov = o.at("nesterov").get<bool>();
  c.train.optimizer.beta1 = o.at("beta1").get<double>();
  c.train.optimizer.beta2 = o.at("beta2").get<double>();
  c.train.optimizer.eps = o.at("eps").get<double>();
  const json& s = t.at("schedule");
  c.train.schedule.type = parse_enum<ScheduleType>(s.at("type"), kScheduleNames, "train.schedule.type");
  c.train.schedule.warmup_epochs = s.at("warmup_epochs").get<double>();
  c.train.schedule.step_epochs = s.at("step_epochs").get<int64_t>();
  c.train.schedule.gamma = s.at("gamma").get<double>();
  c.train.schedule.min_lr = s.at("min_lr").get<double>();
  c.train.grad_accum = t.at("grad_accum").get<int>();
  c.train.threads = t.at("threads").get<int>();
  c.train.eval_every = t.at("eval_every").get<int64_t>();
  c.train.save_model = t.at("save_model").get<bool>();

  const json& cp = j.at("compute");
  c.compute.backend = parse_enum<BackendChoice>(cp.at("backend"), kBackendNames, "compute.backend");
  c.compute.devices = cp.at("devices").get<int>();
  c.compute.grad_compression =
      parse_enum<GradCompression>(cp.at("grad_compression"), kCompressionNames, "compute.grad_compression");

  const json& p = j.at("prune");
  c.prune.method = p.at("method").get<std::string>();
  c.prune.ratio = p.at("ratio").get<double>();
  c.prune.scope = p.at("scope").get<std::string>();
  c.prune.schedule = p.at("schedule").get<std::string>();
  c.prune.finetune_epochs = p.at("finetune_epochs").get<int64_t>();
  c.prune.finetune_lr_scale = p.at("finetune_lr_scale").get<double>();
  c.prune.exclude = split_prune_exclude(p.at("exclude").get<std::string>());
  c.prune.nm_n = p.at("nm_n").get<int>();
  c.prune.nm_m = p.at("nm_m").get<int>();
  if (c.prune.method == "nm" && c.prune.nm_n > c.prune.nm_m)
    throw ConfigError("prune.nm_n: " + std::to_string(c.prune.nm_n) + " is larger than prune.nm_m = " +
                      std::to_string(c.prune.nm_m) + "; allowed: 1 <= nm_n <= nm_m (e.g. 2:4)");
  const json& agp = p.at("agp");
  c.prune.agp_initial = agp.at("initial").get<double>();
  c.prune.agp_start_step = agp.at("start_step").get<int64_t>();
  c.prune.agp_end_step = agp.at("end_step").get<int64_t>();
  c.prune.agp_frequency = agp.at("frequency").get<int64_t>();
  if (c.prune.schedule == "agp" && c.prune.agp_initial > c.prune.ratio)
    throw ConfigError("prune.agp.initial: " + std::to_string(c.prune.agp_initial) + " is above prune.ratio = " +
                      std::to_string(c.prune.ratio) + " (the final sparsity); allowed: 0 <= initial <= ratio");
  if (c.prune.agp_end_step > 0 && c.prune.agp_end_step <= c.prune.agp_start_step)
    throw ConfigError("prune.agp.end_step: " + std::to_string(c.prune.agp_end_step) +
                      " must be after prune.agp.start_step = " + std::to_string(c.prune.agp_start_step) +
                      " (or 0 = half the fine-tuning steps)");
  c.prune.sensitivity = p.at("sensitivity").get<bool>();
  c.prune.sensitivity_samples = p.at("sensitivity_samples").get<int64_t>();
  c.prune.sensitivity_pick = p.at("sensitivity_pick").get<bool>();
  if (c.prune.sensitivity_pick && !c.prune.sensitivity)
    throw ConfigError("prune.sensitivity_pick: true needs prune.sensitivity = true (the curves it picks from)");

  const json& ds = j.at("distill");
  c.distill.teacher = ds.at("teacher").get<std::string>();
  c.distill.temperature = ds.at("temperature").get<double>();
  c.distill.alpha = ds.at("alpha").get<double>();
  c.distill.feature_weight = ds.at("feature_weight").get<double>();
  c.distill.feature_pairs = ds.at("feature_pairs").get<std::string>();
  c.distill.teacher_epochs = ds.at("teacher_epochs").get<int>();
  c.distill.student_augment_factor = ds.at("student_augment_factor").get<double>();
  c.distill.cache_teacher = ds.at("cache_teacher").get<bool>();
  c.distill.teacher_cache = ds.at("teacher_cache").get<std::string>();

  const json& q = j.at("quant");
  c.quant.mode = q.at("mode").get<std::string>();
  c.quant.calibration = q.at("calibration").get<std::string>();
  c.quant.percentile = q.at("percentile").get<double>();
  c.quant.granularity = q.at("granularity").get<std::string>();
  c.quant.calib_samples = q.at("calib_samples").get<int64_t>();
  c.quant.calib_batch_size = q.at("calib_batch_size").get<int64_t>();
  c.quant.outlier_fraction = q.at("outlier_fraction").get<double>();
  c.quant.compare_calibrators = q.at("compare_calibrators").get<bool>();
  c.quant.qat_epochs = q.at("qat_epochs").get<int64_t>();
  c.quant.qat_lr_scale = q.at("qat_lr_scale").get<double>();
  c.quant.mixed_precision = q.at("mixed_precision").get<bool>();
  c.quant.max_accuracy_drop = q.at("max_accuracy_drop").get<double>();

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
