// The experiment schema table, and the helpers that describe a field to a user or a form.
// To add a knob: add one row here (or, for a stage's section, to its Stage::schema_fields); validation,
// --help, flatten_config and the GUI follow from it.
#include "engine/run/config_schema.h"

#include "engine/run/stage_registry.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace lathe {

namespace {

using Kind = FieldSpec::Kind;
using namespace schema;

std::string section_of(const std::string& path) {
  const size_t dot = path.find('.');
  return dot == std::string::npos ? "experiment" : path.substr(0, dot);
}

std::vector<FieldSpec> build_schema() {
  std::vector<FieldSpec> s;
  // --- experiment
  s.push_back(string("name", "experiment", "Run name shown in the run table and used for the output folder"));
  s.push_back(integer("seed", 0, 0, kInf, "Seed for initialisation, shuffling and augmentation"));
  s.push_back(string("description", "", "Free text kept with the run"));
  // --- data
  s.push_back(enumeration("data.dataset", {"fashion-mnist", "idx", "npz", "folder"},
                          "fashion-mnist (the packaged files), idx (any IDX image/label files), npz (NumPy arrays "
                          "x_train, y_train, x_test, y_test) or folder (train/ and test/ with one subfolder of "
                          "PNG/JPEG files per class)"));
  s.push_back(
      only_when(string("data.path", "",
                       "fashion-mnist: folder of its files (empty = the Debian package folder); npz: the .npz file "
                       "or a folder of x_train.npy, y_train.npy, x_test.npy, y_test.npy; folder: the root holding "
                       "train/ and test/"),
                "data.dataset", {"fashion-mnist", "npz", "folder"}));
  s.push_back(only_when(string("data.train_images", "", "Training images IDX file, .gz or plain (dataset=idx)"),
                        "data.dataset", {"idx"}));
  s.push_back(only_when(string("data.train_labels", "", "Training labels IDX file, .gz or plain (dataset=idx)"),
                        "data.dataset", {"idx"}));
  s.push_back(only_when(string("data.test_images", "", "Test images IDX file, .gz or plain (dataset=idx)"),
                        "data.dataset", {"idx"}));
  s.push_back(only_when(string("data.test_labels", "", "Test labels IDX file, .gz or plain (dataset=idx)"),
                        "data.dataset", {"idx"}));
  s.push_back(only_when(integer("data.num_classes", 0, 0, 100000,
                                "Classes (npz): labels must be below it; 0 = largest training label + 1"),
                        "data.dataset", {"npz"}));
  s.push_back(only_when(integer("data.image_size", 32, 1, 1024,
                                "Side of the square images a folder's files are resized to (bilinear, dataset=folder)"),
                        "data.dataset", {"folder"}));
  s.push_back(only_when(
      integer("data.channels", 3, 1, 3, "Channels of a folder's images: 1 (grey) or 3 (RGB) (dataset=folder)"),
      "data.dataset", {"folder"}));
  s.push_back(integer("data.train_subset", 0, 0, kInf, "Use only the first N training samples; 0 = all"));
  s.push_back(integer("data.test_subset", 0, 0, kInf, "Use only the first N test samples; 0 = all"));
  s.push_back(integer("data.augment.shift_px", 0, 0, 8, "Random shift of up to N pixels in x and y"));
  s.push_back(boolean("data.augment.hflip", false, "Random horizontal flip"));
  s.push_back(number("data.augment.noise_std", 0.0, 0, 1, "Std of Gaussian pixel noise (inputs in [0,1])"));
  s.push_back(number("data.augment.strength", 1.0, 0, 4, "Scales every augmentation at once; 0 = off"));
  s.push_back(integer("data.prefetch", 2, 1, 16, "Batches prepared ahead by the loader thread"));
  // --- model
  s.push_back(enumeration("model.zoo", {"mlp", "cnn", "teacher", "student", "custom", "onnx"},
                          "Reference model, custom (then model.layers describes it) or onnx (model.onnx; "
                          "implied when only model.onnx is given)"));
  s.push_back(only_when(field("model.layers", Kind::object_list, nlohmann::json::array(),
                              "Layers of a custom model, e.g. [{\"type\":\"linear\",\"out\":128},{\"type\":\"relu\"}]"),
                        "model.zoo", {"custom"}));
  s.push_back(string("model.init_from", "", "Initialise the weights from this safetensors file"));
  s.push_back(
      only_when(string("model.onnx", "",
                       "An ONNX model file (opsets 11-17, NCHW) giving the graph and its weights (model.zoo = onnx)"),
                "model.zoo", {"onnx"}));
  // --- train
  s.push_back(integer("train.epochs", 5, 1, 10000, "Passes over the training set"));
  s.push_back(integer("train.batch_size", 128, 1, 65536, "Samples per optimizer step (before grad_accum)"));
  s.push_back(enumeration("train.precision", {"fp32", "bf16", "f16"},
                          "Compute precision of linear/conv (f32 master weights; BN, loss and updates stay f32); "
                          "f16 uses dynamic loss scaling. Emulated (values rounded, f32 arithmetic) where the "
                          "device has no bf16/f16 kernels; the run's precision event says which"));
  s.push_back(enumeration("train.optimizer.type", {"sgd", "adamw"}, "Optimizer"));
  s.push_back(number("train.optimizer.lr", nullptr, 0, 10,
                     "Learning rate; unset = model default (0.05 mlp/student, 0.02 cnn/teacher, 0.01 custom/onnx)",
                     true));
  s.push_back(only_when(number("train.optimizer.momentum", 0.9, 0, 1, "SGD momentum", false, true),
                        "train.optimizer.type", {"sgd"}));
  s.push_back(number("train.optimizer.weight_decay", 0.0, 0, kInf, "Weight decay (decoupled for adamw)"));
  s.push_back(only_when(boolean("train.optimizer.nesterov", false, "Nesterov momentum (sgd)"), "train.optimizer.type",
                        {"sgd"}));
  const std::vector<std::string> adamw = {"adamw"};
  s.push_back(only_when(number("train.optimizer.beta1", 0.9, 0, 1, "AdamW first-moment decay", false, true),
                        "train.optimizer.type", adamw));
  s.push_back(only_when(number("train.optimizer.beta2", 0.999, 0, 1, "AdamW second-moment decay", false, true),
                        "train.optimizer.type", adamw));
  s.push_back(
      only_when(number("train.optimizer.eps", 1e-8, 0, kInf, "AdamW epsilon", true), "train.optimizer.type", adamw));
  s.push_back(enumeration("train.schedule.type", {"constant", "step", "cosine"}, "Learning-rate schedule"));
  s.push_back(number("train.schedule.warmup_epochs", 0.0, 0, kInf, "Linear warm-up from 0, in epochs"));
  s.push_back(only_when(integer("train.schedule.step_epochs", 1, 1, kInf, "step: multiply lr by gamma every N epochs"),
                        "train.schedule.type", {"step"}));
  s.push_back(only_when(number("train.schedule.gamma", 0.1, 0, 1, "step: lr factor per step", true),
                        "train.schedule.type", {"step"}));
  s.push_back(only_when(number("train.schedule.min_lr", 0.0, 0, kInf, "cosine: final learning rate"),
                        "train.schedule.type", {"cosine"}));
  s.push_back(integer("train.grad_accum", 1, 1, 1024, "Micro-batches accumulated per optimizer step"));
  s.push_back(integer("train.threads", 0, 0, 1024, "CPU threads; 0 = all cores"));
  s.push_back(integer("train.eval_every", 1, 1, kInf, "Evaluate on the test set every N epochs"));
  s.push_back(boolean("train.save_model", true, "Save the trained weights (safetensors) in the run folder"));
  const auto f16 = [](FieldSpec f) { return only_when(std::move(f), "train.precision", {"f16"}); };
  s.push_back(f16(number("train.loss_scale.init", 65536.0, 0, kInf, "f16: initial loss scale", true)));
  s.push_back(f16(number("train.loss_scale.growth_factor", 2.0, 1, kInf,
                         "f16: scale x this after growth_interval good steps in a row")));
  s.push_back(f16(number("train.loss_scale.backoff_factor", 0.5, 0, 1,
                         "f16: scale x this on a step with inf/nan gradients (the step is skipped)", true, true)));
  s.push_back(
      f16(integer("train.loss_scale.growth_interval", 2000, 1, kInf, "f16: good steps before the scale grows")));
  // --- compute
  s.push_back(enumeration("compute.backend", {"auto", "cpu", "cuda", "reference"},
                          "auto = cuda when a GPU is present, else cpu; reference = plain loops"));
  s.push_back(integer(
      "compute.devices", 1, 1, 64,
      "Data-parallel ranks: processes that train one model together (one GPU each, or a share of the CPU cores)"));
  s.push_back(string("compute.rendezvous", "",
                     "Where ranks meet: \"\" = a folder next to rank 0's run folder (one machine), a shared "
                     "folder, or redis://host:port"));
  s.push_back(number("compute.timeout_s", 60.0, 0, kInf,
                     "Seconds a rank waits for the others (joining, every collective) before the run fails", true));
  s.push_back(number("compute.bucket_mb", 25.0, 0, kInf, "Gradient bucket size of the all-reduce in MiB", true));
  s.push_back(string("compute.rendezvous_id", "",
                     "Key prefix the ranks of one run share; \"\" = rank 0's run id, or under srun/torchrun "
                     "SLURM_JOB_ID.SLURM_STEP_ID / TORCHELASTIC_RUN_ID"));
  s.push_back(enumeration("compute.grad_compression", {"none", "fp16", "bf16"},
                          "Gradient buckets sent in 16 bits (half the bytes; sums in f32 on each hop)"));
  s.push_back(boolean(
      "compute.shard_optimizer", false,
      "ZeRO-1: each rank keeps the optimizer state of its 1/N range of the parameters (taken as one flat array) only"));
  // The distributed knobs (rendezvous, timeout, buckets, compression, ZeRO-1) have no condition: under
  // srun or torchrun the launcher sets the world size, and compute.devices stays 1 (cli_ranks.cpp).
  s.push_back(only_when(
      number("compute.telemetry_s", 1.0, 0, kInf,
             "Seconds between GPU telemetry readings (NVML and GPM metrics, read off the training thread)", true),
      "compute.backend", {"auto", "cuda"}));
  // --- the stages' sections, in pipeline order (stage.h)
  for (const auto& stage : stage_prototypes())
    for (FieldSpec& f : stage->schema_fields())
      s.push_back(std::move(f));
  // --- checkpoint
  s.push_back(number("checkpoint.every_min", 30, 0, kInf, "Minutes between checkpoints; 0 = never by time"));
  s.push_back(integer("checkpoint.every_steps", 0, 0, kInf, "Optimizer steps between checkpoints; 0 = never by steps"));
  s.push_back(integer("checkpoint.keep", 3, 1, kInf, "Newest checkpoints kept per run"));
  s.push_back(
      string("checkpoint.dir", "",
             "Folder under which each run keeps its checkpoints in <dir>/<run id>; empty = ckpt/ in the run folder"));
  // --- cost
  s.push_back(string("cost.instance", "local", "Instance from resources/prices.json used to price the run"));
  s.push_back(enumeration("cost.pricing", {"on-demand", "spot"}, "Which hourly price applies"));
  s.push_back(number("cost.interruptions_per_hour", 0, 0, kInf,
                     "Simulated spot interruptions per hour (Poisson, seeded): lathe-cli run supervises the "
                     "training, sends notices, kills at the end of the notice window and resumes"));
  s.push_back(enumeration("cost.notice_provider", {"none", "ec2", "gcp"},
                          "Cloud whose spot/preemption notice endpoint is polled (none = only SIGTERM)"));
  // cost.notice_provider applies whatever cost.pricing says: lathe-cli run polls it on any run.
  const auto polled = [](FieldSpec f) { return only_when(std::move(f), "cost.notice_provider", {"ec2", "gcp"}); };
  s.push_back(polled(string("cost.notice_url", "",
                            "Base URL of the metadata server; empty = http://169.254.169.254 (tests use a local "
                            "server)")));
  s.push_back(polled(number("cost.notice_poll_s", 5, 0.05, 3600, "Seconds between polls of the notice endpoint")));
  s.push_back(only_when(number("cost.notice_s", 0, 0, kInf,
                               "Simulated spot interruptions: seconds between the notice and the kill; 0 = the "
                               "provider's (120 ec2 and none, 30 gcp)"),
                        {above("cost.interruptions_per_hour", 0)}));
  s.push_back(number("cost.restart_s", 60, 0, kInf, "Seconds to get a new instance after an interruption"));
  // --- output
  s.push_back(string("output.dir", "runs", "Folder under which each run gets its own folder"));
  s.push_back(boolean("output.onnx", false,
                      "Also write the final f32 model (after pruning) as model.onnx in the run folder (opset 13)"));
  return s;
}

std::string format_bound(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<int64_t>(v));
  return nlohmann::json(v).dump();
}

}  // namespace

namespace schema {
FieldSpec field(std::string path, Kind kind, nlohmann::json def, std::string doc) {
  FieldSpec f;
  f.path = std::move(path);
  f.kind = kind;
  f.default_value = std::move(def);
  f.doc = std::move(doc);
  f.section = section_of(f.path);
  return f;
}
FieldSpec integer(std::string path, int64_t def, double min, double max, std::string doc) {
  FieldSpec f = field(std::move(path), Kind::integer, def, std::move(doc));
  f.min = min;
  f.max = max;
  return f;
}
FieldSpec number(std::string path, nlohmann::json def, double min, double max, std::string doc, bool min_exclusive,
                 bool max_exclusive) {
  FieldSpec f = field(std::move(path), Kind::number, std::move(def), std::move(doc));
  f.min = min;
  f.max = max;
  f.min_exclusive = min_exclusive;
  f.max_exclusive = max_exclusive;
  return f;
}
FieldSpec boolean(std::string path, bool def, std::string doc) {
  return field(std::move(path), Kind::boolean, def, std::move(doc));
}
FieldSpec string(std::string path, std::string def, std::string doc) {
  return field(std::move(path), Kind::string, std::move(def), std::move(doc));
}
FieldSpec enumeration(std::string path, std::vector<std::string> choices, std::string doc, std::string def) {
  FieldSpec f = field(std::move(path), Kind::enumeration, def.empty() ? choices.front() : def, std::move(doc));
  f.choices = std::move(choices);
  return f;
}
FieldSpec unsupported(FieldSpec f, std::string reason) {
  f.supported = false;
  f.unsupported_reason = std::move(reason);
  return f;
}
FieldSpec::Condition one_of(std::string path, std::vector<nlohmann::json> values) {
  FieldSpec::Condition c;
  c.path = std::move(path);
  c.values = std::move(values);
  return c;
}
FieldSpec::Condition above(std::string path, double bound) {
  FieldSpec::Condition c;
  c.path = std::move(path);
  c.test = FieldSpec::Condition::Test::above;
  c.bound = bound;
  return c;
}
FieldSpec::Condition non_empty(std::string path) {
  FieldSpec::Condition c;
  c.path = std::move(path);
  c.test = FieldSpec::Condition::Test::non_empty;
  return c;
}
FieldSpec::Condition starts_with(std::string path, std::string prefix) {
  FieldSpec::Condition c;
  c.path = std::move(path);
  c.test = FieldSpec::Condition::Test::starts_with;
  c.prefix = std::move(prefix);
  return c;
}
FieldSpec::Condition not_starts_with(std::string path, std::string prefix) {
  FieldSpec::Condition c = starts_with(std::move(path), std::move(prefix));
  c.test = FieldSpec::Condition::Test::not_starts_with;
  return c;
}
FieldSpec only_when(FieldSpec f, std::vector<FieldSpec::Condition> any) {
  f.applies_when.push_back(std::move(any));
  return f;
}
FieldSpec only_when(FieldSpec f, std::string on, std::vector<std::string> values) {
  return only_when(std::move(f), {one_of(std::move(on), std::vector<nlohmann::json>(values.begin(), values.end()))});
}

}  // namespace schema

const std::vector<FieldSpec>& experiment_schema() {
  static const std::vector<FieldSpec> schema = build_schema();
  return schema;
}

const FieldSpec* find_field(const std::string& path) {
  for (const FieldSpec& f : experiment_schema())
    if (f.path == path)
      return &f;
  return nullptr;
}

const char* kind_name(FieldSpec::Kind kind) {
  switch (kind) {
    case Kind::integer:
      return "integer";
    case Kind::number:
      return "number";
    case Kind::boolean:
      return "boolean";
    case Kind::string:
      return "string";
    case Kind::enumeration:
      return "enumeration";
    case Kind::object_list:
      return "object_list";
  }
  return "?";
}

std::string describe_allowed(const FieldSpec& f) {
  std::ostringstream os;
  switch (f.kind) {
    case Kind::integer:
    case Kind::number: {
      os << (f.kind == Kind::integer ? "an integer" : "a number");
      const bool has_min = std::isfinite(f.min), has_max = std::isfinite(f.max);
      if (f.kind == Kind::integer && has_min && has_max && !f.min_exclusive && !f.max_exclusive)
        os << " from " << format_bound(f.min) << " to " << format_bound(f.max);
      else {
        if (has_min)
          os << (f.min_exclusive ? " > " : " >= ") << format_bound(f.min);
        if (has_min && has_max)
          os << " and";
        if (has_max)
          os << (f.max_exclusive ? " < " : " <= ") << format_bound(f.max);
      }
      if (f.default_value.is_null())
        os << ", or null for the default";
      break;
    }
    case Kind::boolean:
      os << "true or false";
      break;
    case Kind::string:
      os << "a string";
      break;
    case Kind::enumeration:
      os << "one of ";
      for (size_t i = 0; i < f.choices.size(); ++i)
        os << (i ? ", " : "") << '"' << f.choices[i] << '"';
      break;
    case Kind::object_list:
      os << "an array of objects, each with a string \"type\"";
      break;
  }
  return os.str();
}

namespace {

/// The value at a dotted path of a config document, or nullptr where the document has none.
const nlohmann::json* value_at(const nlohmann::json& cfg, const std::string& path) {
  const nlohmann::json* node = &cfg;
  size_t start = 0;
  while (node && start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    node = node->is_object() && node->contains(key) ? &node->at(key) : nullptr;
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  return node;
}

}  // namespace

namespace {

using Condition = FieldSpec::Condition;

/// The value of the field a condition depends on: the config's, else the schema default.
nlohmann::json controlling_value(const Condition& when, const nlohmann::json& cfg) {
  if (const nlohmann::json* node = value_at(cfg, when.path))
    return *node;
  const FieldSpec* on = find_field(when.path);
  return on ? on->default_value : nlohmann::json();
}

bool holds(const Condition& when, const nlohmann::json& cfg) {
  const nlohmann::json value = controlling_value(when, cfg);
  switch (when.test) {
    case Condition::Test::one_of:
      return std::find(when.values.begin(), when.values.end(), value) != when.values.end();
    case Condition::Test::above:
      return value.is_number() && value.get<double>() > when.bound;
    case Condition::Test::non_empty:
      return value.is_string() && !value.get_ref<const std::string&>().empty();
    case Condition::Test::starts_with:
    case Condition::Test::not_starts_with: {
      const bool starts = value.is_string() && value.get_ref<const std::string&>().rfind(when.prefix, 0) == 0;
      return starts == (when.test == Condition::Test::starts_with);
    }
  }
  return false;
}

bool clause_holds(const std::vector<Condition>& any, const nlohmann::json& cfg) {
  return std::any_of(any.begin(), any.end(), [&](const Condition& c) { return holds(c, cfg); });
}

std::string describe(const Condition& when) {
  switch (when.test) {
    case Condition::Test::one_of: {
      std::string text = when.path + " is ";
      for (size_t i = 0; i < when.values.size(); ++i)
        text += (i == 0 ? "" : i + 1 == when.values.size() ? " or " : ", ") + when.values[i].dump();
      return text;
    }
    case Condition::Test::above:
      return when.path + " > " + format_bound(when.bound);
    case Condition::Test::non_empty:
      return when.path + " is not empty";
    case Condition::Test::starts_with:
      return when.path + " starts with " + nlohmann::json(when.prefix).dump();
    case Condition::Test::not_starts_with:
      return when.path + " does not start with " + nlohmann::json(when.prefix).dump();
  }
  return when.path;
}

}  // namespace

bool field_applies(const FieldSpec& f, const nlohmann::json& cfg) {
  return std::all_of(f.applies_when.begin(), f.applies_when.end(),
                     [&](const std::vector<Condition>& any) { return clause_holds(any, cfg); });
}

std::string why_not_applies(const FieldSpec& f, const nlohmann::json& cfg) {
  std::vector<std::string> seen;
  std::string text;
  for (const std::vector<Condition>& any : f.applies_when) {
    if (clause_holds(any, cfg))
      continue;
    for (const Condition& c : any) {
      if (std::find(seen.begin(), seen.end(), c.path) != seen.end())
        continue;
      seen.push_back(c.path);
      text += (text.empty() ? "" : "; ") + c.path + " is " + controlling_value(c, cfg).dump() +
              (value_at(cfg, c.path) ? "" : ", the default");
    }
  }
  return text;
}

std::vector<std::string> unused_fields(const nlohmann::json& cfg) {
  std::vector<std::string> out;
  for (const FieldSpec& f : experiment_schema()) {
    if (f.applies_when.empty() || !value_at(cfg, f.path) || field_applies(f, cfg))
      continue;
    out.push_back(f.path + " is set but only used when " + describe_applies_when(f) + " (" + why_not_applies(f, cfg) +
                  "): it has no effect");
  }
  return out;
}

std::string describe_applies_when(const FieldSpec& f) {
  std::string text;
  for (const std::vector<Condition>& any : f.applies_when) {
    std::string clause;
    for (const Condition& c : any)
      clause += (clause.empty() ? "" : " or ") + describe(c);
    if (any.size() > 1 && f.applies_when.size() > 1)
      clause = "(" + clause + ")";
    text += (text.empty() ? "" : ", and ") + clause;
  }
  return text;
}

namespace {

nlohmann::json applies_when_json(const FieldSpec& f) {
  static const char* const kTests[] = {"one_of", "above", "non_empty", "starts_with", "not_starts_with"};
  nlohmann::json all = nlohmann::json::array();
  for (const std::vector<Condition>& any : f.applies_when) {
    nlohmann::json conditions = nlohmann::json::array();
    for (const Condition& c : any) {
      nlohmann::json j{{"path", c.path}, {"test", kTests[static_cast<int>(c.test)]}};
      if (c.test == Condition::Test::one_of)
        j["values"] = c.values;
      if (c.test == Condition::Test::above)
        j["bound"] = c.bound;
      if (c.test == Condition::Test::starts_with || c.test == Condition::Test::not_starts_with)
        j["prefix"] = c.prefix;
      conditions.push_back(std::move(j));
    }
    all.push_back({{"any_of", std::move(conditions)}});
  }
  return {{"all_of", std::move(all)}, {"text", describe_applies_when(f)}};
}

}  // namespace

nlohmann::json schema_as_json() {
  nlohmann::json fields = nlohmann::json::array();
  for (const FieldSpec& f : experiment_schema()) {
    nlohmann::json j;
    j["path"] = f.path;
    j["kind"] = kind_name(f.kind);
    j["default"] = f.default_value;
    auto bound = [&](double v) {
      return f.kind == Kind::integer ? nlohmann::json(static_cast<int64_t>(v)) : nlohmann::json(v);
    };
    if (std::isfinite(f.min))
      j["min"] = bound(f.min);
    if (std::isfinite(f.max))
      j["max"] = bound(f.max);
    j["min_exclusive"] = f.min_exclusive;
    j["max_exclusive"] = f.max_exclusive;
    if (f.kind == Kind::enumeration)
      j["choices"] = f.choices;
    j["doc"] = f.doc;
    j["allowed"] = describe_allowed(f);
    j["supported"] = f.supported;
    if (!f.supported)
      j["unsupported_reason"] = f.unsupported_reason;
    j["section"] = f.section;
    if (!f.applies_when.empty())
      j["applies_when"] = applies_when_json(f);
    fields.push_back(std::move(j));
  }
  return {{"version", 2}, {"fields", std::move(fields)}};
}

}  // namespace lathe
