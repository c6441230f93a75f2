// Builders for the zoo models and the JSON layer list.
#include "engine/nn/zoo.h"

#include <cmath>
#include <set>

#include "engine/nn/add.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/relu.h"

namespace lathe {

std::vector<std::string> zoo_model_names() { return {"mlp", "cnn", "teacher", "student"}; }

namespace {

/// Two conv/ReLU/pool blocks and two linear layers, for C x H x W inputs (H and W at least 4: each
/// 2x2 pool halves them, rounding down, as PyTorch's MaxPool2d(2) does).
std::unique_ptr<Model> conv_net(int64_t c1, int64_t c2, int64_t hidden, const Shape& input, int64_t classes) {
  const int64_t channels = input[0], h = input[1] / 4, w = input[2] / 4;
  auto m = std::make_unique<Model>(input);
  m->add("0", std::make_unique<Conv2d>(channels, c1, 3, 1, 1));
  m->add("1", std::make_unique<ReLU>());
  m->add("2", std::make_unique<MaxPool2d>(2));
  m->add("3", std::make_unique<Conv2d>(c1, c2, 3, 1, 1));
  m->add("4", std::make_unique<ReLU>());
  m->add("5", std::make_unique<MaxPool2d>(2));
  m->add("6", std::make_unique<Flatten>());
  m->add("7", std::make_unique<Linear>(c2 * h * w, hidden));
  m->add("8", std::make_unique<ReLU>());
  m->add("9", std::make_unique<Linear>(hidden, classes));
  return m;
}

}  // namespace

std::unique_ptr<Model> build_zoo_model(const std::string& name) { return build_zoo_model(name, {1, 28, 28}, 10); }

std::unique_ptr<Model> build_zoo_model(const std::string& name, const Shape& input, int num_classes) {
  if (input.size() != 3 || input[0] < 1 || input[1] < 1 || input[2] < 1 || num_classes < 1)
    throw ConfigError("model.zoo: '" + name + "' needs images of C x H x W >= 1 and at least one class");
  const int64_t classes = num_classes;
  const int64_t features = input[0] * input[1] * input[2];
  if (name == "mlp") {
    auto m = std::make_unique<Model>(Shape{features});
    m->add("0", std::make_unique<Linear>(features, 512));
    m->add("1", std::make_unique<ReLU>());
    m->add("2", std::make_unique<Linear>(512, 256));
    m->add("3", std::make_unique<ReLU>());
    m->add("4", std::make_unique<Linear>(256, classes));
    return m;
  }
  if (name == "student") {
    auto m = std::make_unique<Model>(Shape{features});
    m->add("0", std::make_unique<Linear>(features, 64));
    m->add("1", std::make_unique<ReLU>());
    m->add("2", std::make_unique<Linear>(64, classes));
    return m;
  }
  if (name == "cnn" || name == "teacher") {
    if (input[1] < 4 || input[2] < 4)
      throw ConfigError("model.zoo: '" + name + "' pools twice by 2 and needs images of at least 4x4; this dataset has " +
                        std::to_string(input[1]) + "x" + std::to_string(input[2]) +
                        " (use model.zoo = \"mlp\", or \"custom\" with model.layers)");
    return name == "cnn" ? conv_net(32, 64, 128, input, classes) : conv_net(64, 128, 256, input, classes);
  }
  throw ConfigError("model.zoo: unknown model '" + name + "': allowed mlp, cnn, teacher, student, custom");
}

namespace {

/// An integer knob of a layer, at least `min` (1 for sizes, kernels and strides; 0 for padding).
int64_t get_int(const nlohmann::json& spec, const std::string& where, const char* key, int64_t def, bool required,
                int64_t min = 1) {
  if (!spec.contains(key)) {
    if (required)
      throw ConfigError(where + ": missing \"" + key + "\" (an integer >= " + std::to_string(min) + ")");
    return def;
  }
  const auto& v = spec[key];
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > (1ull << 31)) ||
      v.get<int64_t>() < min || v.get<int64_t>() > (int64_t{1} << 31))
    throw ConfigError(where + "." + key + ": expected an integer from " + std::to_string(min) + " to 2147483648, got " +
                      v.dump());
  return v.get<int64_t>();
}

/// A string knob of a layer ("name", "input").
std::string get_string(const nlohmann::json& spec, const std::string& where, const char* key, std::string def) {
  if (!spec.contains(key))
    return def;
  if (!spec[key].is_string() || spec[key].get<std::string>().empty())
    throw ConfigError(where + "." + key + ": expected a non-empty string (a layer name), got " + spec[key].dump());
  return spec[key].get<std::string>();
}

/// A number knob of a layer within [lo, hi] (hi excluded when `hi_open`).
double get_number(const nlohmann::json& spec, const std::string& where, const char* key, double def, double lo,
                  double hi, bool hi_open = false) {
  if (!spec.contains(key))
    return def;
  const auto& v = spec[key];
  const double x = v.is_number() ? v.get<double>() : NAN;
  if (!v.is_number() || !(x >= lo) || (hi_open ? !(x < hi) : !(x <= hi)))
    throw ConfigError(where + "." + key + ": expected a number from " + nlohmann::json(lo).dump() + " to " +
                      nlohmann::json(hi).dump() + (hi_open ? " (excluded)" : "") + ", got " + v.dump());
  return x;
}

/// A window of `kernel` (with `padding` each side) must fit the `current` [N, C, H, W] input.
void check_window(const Shape& current, int64_t kernel, int64_t padding, const std::string& where,
                  const std::string& what) {
  if (current.size() == 4 && (current[2] + 2 * padding < kernel || current[3] + 2 * padding < kernel))
    throw ConfigError(where + ": " + what + " kernel " + std::to_string(kernel) + " is larger than its input " +
                      std::to_string(current[2]) + "x" + std::to_string(current[3]) +
                      (padding ? " with padding " + std::to_string(padding) : std::string()) +
                      "; use a smaller kernel or remove a pooling layer before it");
}

bool get_bool(const nlohmann::json& spec, const std::string& where, const char* key, bool def) {
  if (!spec.contains(key))
    return def;
  if (!spec[key].is_boolean())
    throw ConfigError(where + "." + key + ": expected true or false, got " + spec[key].dump());
  return spec[key].get<bool>();
}

void check_keys(const nlohmann::json& spec, const std::string& where, const std::set<std::string>& allowed) {
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    if (allowed.count(it.key()) || it.key() == "type" || it.key() == "name" || it.key() == "input")
      continue;
    std::string list = "type, name, input";
    for (const auto& a : allowed)
      list += ", " + a;
    throw ConfigError(where + ": unknown key \"" + it.key() + "\" for a " + spec["type"].get<std::string>() +
                      " layer; allowed: " + list);
  }
}

}  // namespace

std::unique_ptr<Model> build_model_from_layers(const nlohmann::json& layers, const Shape& input_shape) {
  if (!layers.is_array() || layers.empty())
    throw ConfigError("model.layers: expected a non-empty list of layers for model.zoo = \"custom\"");
  auto model = std::make_unique<Model>(input_shape);
  Shape current = input_shape;
  current.insert(current.begin(), 1);
  for (size_t i = 0; i < layers.size(); ++i) {
    const nlohmann::json& spec = layers[i];
    const std::string where = "model.layers[" + std::to_string(i) + "]";
    if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string())
      throw ConfigError(where + ": expected an object with a string \"type\"");
    const std::string type = spec["type"].get<std::string>();
    const std::string name = get_string(spec, where, "name", std::to_string(i));
    std::vector<std::string> inputs;
    if (spec.contains("input"))
      inputs.push_back(get_string(spec, where, "input", ""));
    // The input shape of this layer, for inferring sizes.
    if (!inputs.empty()) {
      const int j = model->find(inputs[0]);
      if (inputs[0] == "input") {
        current = input_shape;
        current.insert(current.begin(), 1);
      } else if (j >= 0) {
        current = model->layer_infos()[j].output_shape;
      }
    }
    std::unique_ptr<Layer> layer;
    if (type == "linear") {
      check_keys(spec, where, {"out", "bias"});
      if (current.size() != 2)
        throw ConfigError(where + ": linear needs a flat input, got " + shape_str(current) +
                          " (add {\"type\": \"flatten\"} before it)");
      layer = std::make_unique<Linear>(current[1], get_int(spec, where, "out", 0, true),
                                       get_bool(spec, where, "bias", true));
    } else if (type == "conv2d") {
      check_keys(spec, where, {"out", "kernel", "stride", "padding", "bias"});
      if (current.size() != 4)
        throw ConfigError(where + ": conv2d needs an image input [N, C, H, W], got " + shape_str(current));
      const int64_t kernel = get_int(spec, where, "kernel", 3, false);
      const int64_t padding = get_int(spec, where, "padding", 0, false, 0);
      check_window(current, kernel, padding, where, "conv2d");
      layer = std::make_unique<Conv2d>(current[1], get_int(spec, where, "out", 0, true), kernel,
                                       get_int(spec, where, "stride", 1, false), padding,
                                       get_bool(spec, where, "bias", true));
    } else if (type == "maxpool2d") {
      check_keys(spec, where, {"kernel", "stride", "padding"});
      if (current.size() != 4)
        throw ConfigError(where + ": maxpool2d needs an image input [N, C, H, W], got " + shape_str(current));
      const int64_t kernel = get_int(spec, where, "kernel", 2, false);
      const int64_t padding = get_int(spec, where, "padding", 0, false, 0);
      if (padding * 2 > kernel)
        throw ConfigError(where + ".padding: " + std::to_string(padding) + " is more than half the kernel " +
                          std::to_string(kernel) + "; allowed: 0 to " + std::to_string(kernel / 2));
      check_window(current, kernel, padding, where, "maxpool2d");
      layer = std::make_unique<MaxPool2d>(kernel, get_int(spec, where, "stride", kernel, false), padding);
    } else if (type == "batchnorm2d") {
      check_keys(spec, where, {"eps", "momentum"});
      if (current.size() != 4)
        throw ConfigError(where + ": batchnorm2d needs [N, C, H, W], got " + shape_str(current));
      layer = std::make_unique<BatchNorm2d>(current[1], get_number(spec, where, "eps", 1e-5, 0, 1),
                                            get_number(spec, where, "momentum", 0.1, 0, 1));
    } else if (type == "dropout") {
      check_keys(spec, where, {"p"});
      layer = std::make_unique<Dropout>(get_number(spec, where, "p", 0.5, 0, 1, /*hi_open=*/true), i + 1);
    } else if (type == "relu") {
      check_keys(spec, where, {});
      layer = std::make_unique<ReLU>();
    } else if (type == "flatten") {
      check_keys(spec, where, {});
      layer = std::make_unique<Flatten>();
    } else if (type == "add") {
      check_keys(spec, where, {"inputs"});
      if (!spec.contains("inputs") || !spec["inputs"].is_array() || spec["inputs"].size() != 2)
        throw ConfigError(where + ": add needs \"inputs\": [\"<layer name>\", \"<layer name>\"]");
      for (size_t k = 0; k < 2; ++k)
        if (!spec["inputs"][k].is_string())
          throw ConfigError(where + ".inputs[" + std::to_string(k) + "]: expected a layer name (a string), got " +
                            spec["inputs"][k].dump());
      inputs = spec["inputs"].get<std::vector<std::string>>();
      layer = std::make_unique<Add>();
    } else {
      throw ConfigError(where + ".type: unknown layer type \"" + type +
                        "\"; allowed: linear, conv2d, maxpool2d, batchnorm2d, dropout, relu, flatten, add");
    }
    try {
      model->add(name, std::move(layer), inputs);
    } catch (const ConfigError& e) {
      throw ConfigError(where + ": " + e.what());
    }
    current = model->layer_infos().back().output_shape;
  }
  return model;
}

void check_model_outputs(const Model& model, int num_classes) {
  const std::vector<LayerInfo> infos = model.layer_infos();
  if (infos.empty())
    return;
  const Shape& out = infos.back().output_shape;  // per sample, with a leading batch of 1
  if (out.size() != 2)
    throw ConfigError("model.layers: the last layer gives " + shape_str(out) +
                      " per batch; a classifier must end with one score per class (add a flatten and a linear layer)");
  if (out[1] < num_classes)
    throw ConfigError("model.layers: the last layer gives " + std::to_string(out[1]) +
                      " outputs, but the dataset has " + std::to_string(num_classes) +
                      " classes; give the last linear layer \"out\": " + std::to_string(num_classes));
}

}  // namespace lathe
