// Experiment configs: load a JSON file, apply --set overrides, validate against the schema
// (config_schema.h) with every default filled in, and turn the result into a typed struct.
// Flow: load_config_file -> apply_override* -> validate_config -> parse_experiment.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe {

/// Reads a JSON config. ConfigError when the file is missing, not JSON (with line and column),
/// or not a JSON object.
nlohmann::json load_config_file(const std::string& path);
/// Parses config text; `source` names it in errors ("config file x.json"). ConfigError, never a raw
/// JSON exception: syntax errors with line and column, numbers out of range (1e999), keys that
/// appear twice in one object (with their JSON path), a top level that is not an object.
nlohmann::json parse_config_text(const std::string& text, const std::string& source);

/// Applies one `--set key.path=value`. The value is parsed as JSON when it parses (numbers, true,
/// null, [..], {..}, "quoted"), else taken as a string; for string and enumeration fields a value
/// that parses to a non-string (`name=2024`) is taken as the literal text. `key.path` must be a
/// schema field, else ConfigError listing close matches. Intermediate objects are created.
void apply_override(nlohmann::json& cfg, const std::string& assignment);

/// Checks `cfg` against the schema and returns it with every default filled in (integral numbers
/// given as 5.0 become 5). Throws ConfigError listing every problem, one per line, each starting
/// with the JSON path, then the bad value and what is allowed: unknown keys (with the allowed keys
/// at that level and the closest one), wrong types, out-of-range numbers, unknown choices,
/// unsupported knobs set away from their default, and cross-field rules (model.layers with
/// model.zoo=custom, the idx file names with data.dataset=idx, cost.instance in the price catalog
/// at PriceCatalog::default_path()). Idempotent: validate_config(validate_config(c)) == validate_config(c).
nlohmann::json validate_config(const nlohmann::json& cfg);

/// The candidates close enough to `word` to be a typo of it (edit distance), closest first, at most
/// `max_results`: the "did you mean" of every message that names a config key.
std::vector<std::string> typo_matches(const std::string& word, const std::vector<std::string>& candidates,
                                      size_t max_results);

// ---- the typed config ----------------------------------------------------------------------------

enum class DatasetKind { fashion_mnist, idx, npz, folder };
enum class ModelZoo { mlp, cnn, teacher, student, custom, onnx };
enum class Precision { fp32, bf16, f16 };
enum class OptimizerType { sgd, adamw };
enum class ScheduleType { constant, step, cosine };
enum class BackendChoice { automatic, cpu, cuda, reference };  // "auto" is a C++ keyword
enum class GradCompression { none, fp16, bf16 };
enum class Pricing { on_demand, spot };
enum class PruneMethod { none, l1_unstructured, l1_structured, l2_structured, nm };
enum class PruneScope { global, layer };
enum class PruneSchedule { one_shot, agp };
enum class QuantMode { none, ptq_static, ptq_dynamic, qat };
enum class QuantCalibration { minmax, percentile, entropy, mse };
enum class WeightGranularity { per_tensor, per_channel };

/// The schema spelling of each choice ("fashion-mnist", "auto", "on-demand", ...).
std::string_view enum_name(DatasetKind v);
std::string_view enum_name(ModelZoo v);
std::string_view enum_name(Precision v);
std::string_view enum_name(OptimizerType v);
std::string_view enum_name(ScheduleType v);
std::string_view enum_name(BackendChoice v);
std::string_view enum_name(GradCompression v);
std::string_view enum_name(Pricing v);
std::string_view enum_name(PruneMethod v);
std::string_view enum_name(PruneScope v);
std::string_view enum_name(PruneSchedule v);
std::string_view enum_name(QuantMode v);
std::string_view enum_name(QuantCalibration v);
std::string_view enum_name(WeightGranularity v);

/// The enum value whose enum_name() is the string `v` (validated against the schema's choices);
/// lathe::Error naming `path` when no value of E spells it (a schema/enum mismatch, not a user error).
[[noreturn]] void throw_no_enum_value(const char* path, const std::string& text);
template <class E, int Count>
E parse_choice(const nlohmann::json& v, const char* path) {
  const std::string s = v.get<std::string>();
  for (int i = 0; i < Count; ++i)
    if (enum_name(static_cast<E>(i)) == s)
      return static_cast<E>(i);
  throw_no_enum_value(path, s);
}

/// The learning rate used when train.optimizer.lr is null: 0.05 mlp/student, 0.02 cnn/teacher, 0.01 custom.
double default_learning_rate(ModelZoo zoo);

struct AugmentConfig {
  int shift_px = 0;
  bool hflip = false;
  double noise_std = 0;
  double strength = 1;
};

struct DataConfig {
  DatasetKind dataset = DatasetKind::fashion_mnist;
  std::string path;  ///< fashion-mnist: its folder (empty = the Debian package one); npz: file or folder; folder: root
  std::string train_images, train_labels, test_images, test_labels;  ///< dataset=idx only
  int num_classes = 0;     ///< npz: 0 = counted from the training labels
  int64_t image_size = 32; ///< folder: images resized to image_size x image_size
  int64_t channels = 3;    ///< folder: 1 (grey) or 3 (RGB)
  int64_t train_subset = 0;                                          ///< 0 = all
  int64_t test_subset = 0;                                           ///< 0 = all
  AugmentConfig augment;
  int prefetch = 2;
};

struct ModelConfig {
  ModelZoo zoo = ModelZoo::mlp;
  nlohmann::json layers = nlohmann::json::array();  ///< custom only; checked by the model builder
  std::string init_from;                            ///< safetensors file, empty = fresh init
  std::string onnx;                                 ///< zoo=onnx: the .onnx file giving graph and weights
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::sgd;
  double lr = 0.05;
  bool lr_is_default = true;  ///< lr came from default_learning_rate(), not from the config
  double momentum = 0.9;
  double weight_decay = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
};

struct ScheduleConfig {
  ScheduleType type = ScheduleType::constant;
  double warmup_epochs = 0;
  int64_t step_epochs = 1;
  double gamma = 0.1;
  double min_lr = 0;
};

/// f16 dynamic loss scaling (train.loss_scale.*; GradScaler defaults).
struct LossScaleConfig {
  double init = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

struct TrainConfig {
  int epochs = 5;
  int batch_size = 128;
  Precision precision = Precision::fp32;
  LossScaleConfig loss_scale;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int grad_accum = 1;
  int threads = 0;  ///< 0 = all cores
  int64_t eval_every = 1;
  bool save_model = true;
};

struct ComputeConfig {
  BackendChoice backend = BackendChoice::automatic;
  int devices = 1;            ///< data-parallel ranks
  std::string rendezvous;     ///< "" = a folder next to rank 0's run folder; a folder; "redis://host:port"
  double timeout_s = 60;      ///< how long a rank waits for the others
  double bucket_mb = 25;      ///< gradient bucket size (MiB)
  std::string rendezvous_id;  ///< "" = rank 0's run id (or the launcher's job id)
  GradCompression grad_compression = GradCompression::none;
  bool shard_optimizer = false;  ///< ZeRO stage 1 (engine/dist/sharded_optimizer.h)
  double telemetry_s = 1;        ///< GPU telemetry interval (engine/run/gpu_sampler.h)
};

/// The typed section of a stage (engine/run/stage.h). The built-in stages' sections are members of
/// ExperimentConfig below; any other stage keeps its own in ExperimentConfig::stage_configs.
struct StageConfig {
  virtual ~StageConfig() = default;
};

/// prune.* (parsed by the prune stage, stage_prune.cpp).
struct PruneConfig {
  PruneMethod method = PruneMethod::none;
  PruneScope scope = PruneScope::global;
  PruneSchedule schedule = PruneSchedule::one_shot;
  double ratio = 0.5;
  int64_t finetune_epochs = 1;
  double finetune_lr_scale = 0.25;
  std::vector<std::string> exclude;  ///< node names (prune.exclude split at commas)
  int nm_n = 2, nm_m = 4;
  double agp_initial = 0;
  int64_t agp_start_step = 0, agp_end_step = 0, agp_frequency = 50;  ///< from the fine-tuning start; end 0 = auto
  bool sensitivity = false, sensitivity_pick = false;
  int64_t sensitivity_samples = 2000;
};

/// distill.* (parsed by the distillation stage, stage_distill.cpp).
struct DistillConfig {
  std::string teacher;  ///< "" = no distillation; zoo:<name>, run:<ref> or a .safetensors path
  double temperature = 4, alpha = 0.7, feature_weight = 0.3;
  std::string feature_pairs;  ///< "student_node:teacher_node,..."
  int teacher_epochs = 5;     ///< for a zoo:<name> teacher trained first
  double student_augment_factor = 1.2;
  bool cache_teacher = true;
  std::string teacher_cache;  ///< file for the cached teacher outputs ("" = memory only)
};

/// quant.* (parsed by the quantize stage, stage_quantize.cpp).
struct QuantConfig {
  QuantMode mode = QuantMode::none;
  QuantCalibration calibration = QuantCalibration::minmax;
  WeightGranularity granularity = WeightGranularity::per_channel;
  double percentile = 99.99;
  int64_t calib_samples = 512;
  int64_t calib_batch_size = 64;
  double outlier_fraction = 0.05;  // of the calibration set: the highest-loss training images
  bool compare_calibrators = false;
  int64_t qat_epochs = 1;
  double qat_lr_scale = 0.1;       // QAT learning rate = train.optimizer.lr x this
  bool mixed_precision = false;    // accuracy-driven: keep sensitive layers in f32
  double max_accuracy_drop = 1.0;  // points
};

struct CheckpointConfig {
  double every_min = 30;    ///< 0 = never by time
  int64_t every_steps = 0;  ///< 0 = never by steps
  int64_t keep = 3;
  std::string dir;  ///< "" = <run folder>/ckpt
};

struct CostConfig {
  std::string instance = "local";
  Pricing pricing = Pricing::on_demand;
  double interruptions_per_hour = 0;
  std::string notice_provider = "none";  ///< none | ec2 | gcp
  std::string notice_url;                ///< "" = http://169.254.169.254
  double notice_poll_s = 5;
  double notice_s = 0;  ///< 0 = the provider's window (120 s ec2 and the simulation, 30 s gcp)
  double restart_s = 60;
  /// The notice window in seconds: notice_s, else the provider's.
  double notice_window_s() const { return notice_s > 0 ? notice_s : notice_provider == "gcp" ? 30 : 120; }
};

struct OutputConfig {
  std::string dir = "runs";
  bool onnx = false;  ///< write the final model as model.onnx in the run folder
};

struct ExperimentConfig {
  std::string name;
  uint64_t seed = 0;
  std::string description;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  ComputeConfig compute;
  PruneConfig prune;
  DistillConfig distill;
  QuantConfig quant;
  CheckpointConfig checkpoint;
  CostConfig cost;
  OutputConfig output;
  /// Typed sections of stages that are not members above, keyed by section (Stage::parse sets them).
  std::map<std::string, std::shared_ptr<const StageConfig>> stage_configs;
  nlohmann::json raw;  ///< the validated JSON (train.optimizer.lr stays null when it was left unset)
};

[[noreturn]] void throw_missing_stage_config(const std::string& section);

/// The typed section a stage stored under `section`, or nullptr: a config built in code
/// (ExperimentConfig{}) holds none, and then the stage is at its defaults, i.e. off.
template <class T>
const T* find_stage_config(const ExperimentConfig& cfg, const std::string& section) {
  const auto it = cfg.stage_configs.find(section);
  return it == cfg.stage_configs.end() ? nullptr : dynamic_cast<const T*>(it->second.get());
}

/// The typed section a stage stored under `section` (see stage_configs); lathe::Error when there is
/// none or it is of another type.
template <class T>
const T& stage_config(const ExperimentConfig& cfg, const std::string& section) {
  const auto it = cfg.stage_configs.find(section);
  const T* typed = it == cfg.stage_configs.end() ? nullptr : dynamic_cast<const T*>(it->second.get());
  if (!typed)
    throw_missing_stage_config(section);
  return *typed;
}
/// The section lives inside the config: a temporary would leave the reference dangling.
template <class T>
const T& stage_config(ExperimentConfig&& cfg, const std::string& section) = delete;
template <class T>
const T* find_stage_config(ExperimentConfig&& cfg, const std::string& section) = delete;

/// The typed view of a config. Validates `validated` again (cheap, idempotent), so passing an
/// unvalidated config throws ConfigError rather than reading garbage.
ExperimentConfig parse_experiment(const nlohmann::json& validated);

/// Leaf values by dotted path (keys sorted at each level), for the store's params table: strings as their
/// text (no quotes), numbers and booleans as JSON, null as "null", arrays (model.layers) as compact JSON.
std::vector<std::pair<std::string, std::string>> flatten_config(const nlohmann::json& cfg);

}  // namespace lathe
