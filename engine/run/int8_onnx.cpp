// Int8Model / its saved file -> QdqPlan (see int8_onnx.h).
#include "engine/run/int8_onnx.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "engine/compress/quant/int8_plan_util.h"

namespace lathe {

namespace {

using StepKind = Int8Model::Step::Kind;

nlohmann::json params_json(const QuantParams& p) {
  return {{"scale", p.scale[0]}, {"zero_point", p.zero_point[0]}, {"signed", p.is_signed}};
}

QuantParams params_from(const nlohmann::json& j) {
  QuantParams p;
  p.scale = {j.at("scale").get<float>()};
  p.zero_point = {j.at("zero_point").get<int32_t>()};
  p.bits = 8;
  p.is_signed = j.at("signed").get<bool>();
  p.symmetric = false;
  p.validate();
  return p;
}

void refuse_dynamic(const Int8Model& model) {
  if (model.dynamic())
    throw ConfigError(
        "ONNX QDQ export: a dynamic INT8 plan (quant.mode ptq-dynamic) takes its activation scales from each batch, so "
        "there are none to write; allowed: ptq-static or qat runs");
}

}  // namespace

QdqPlan qdq_plan_of(const Int8Model& model) {
  refuse_dynamic(model);
  QdqPlan plan;
  for (const auto& sp : model.steps()) {
    const Int8Model::Step& s = *sp;
    if (s.kind == StepKind::quantize) {
      plan.values[s.out_node.empty() ? s.node : s.out_node] = s.params;
    } else if (s.kind == StepKind::int8_add) {
      plan.values[s.node] = s.params;
    } else if (s.kind == StepKind::int8_conv || s.kind == StepKind::int8_linear) {
      const Int8LayerData& L = s.kernel->layer();
      QdqLayer q;
      q.weight_q = s.hwc_of.empty() ? L.weights_q : permute_flat_columns(L.weights_q, s.hwc_of, /*to_hwc=*/false);
      q.weight_scale = L.weights.scale;
      q.bias = s.bias;
      q.folded_bn = s.folded_bn;
      plan.layers[s.node] = std::move(q);
      if (L.config.dst)
        plan.values[s.out_node] = *L.config.dst;
    }
  }
  return plan;
}

std::string qdq_plan_metadata(const Int8Model& model) {
  refuse_dynamic(model);
  const QdqPlan plan = qdq_plan_of(model);
  nlohmann::json values = nlohmann::json::object(), layers = nlohmann::json::object();
  for (const auto& [name, p] : plan.values)
    values[name] = params_json(p);
  for (const auto& sp : model.steps())
    if (sp->kind == StepKind::int8_conv || sp->kind == StepKind::int8_linear)
      layers[sp->node] = {{"folded_bn", sp->folded_bn}, {"hwc_of", sp->hwc_of}};
  const std::vector<Int8LayerQuantization> lq = model.layer_quantization();
  const bool per_channel = lq.empty() || lq.front().per_channel_weights;
  return nlohmann::json{{"values", values},
                        {"layers", layers},
                        {"per_channel_weights", per_channel},
                        {"weight_bits", model.weight_bits()}}
      .dump();
}

namespace {

nlohmann::json qdq_metadata(const SafetensorsFile& file, const std::string& path) {
  const auto meta = file.metadata.find("qdq");
  if (meta == file.metadata.end())
    throw DataError(path +
                    ": no \"qdq\" metadata (an INT8 file written before QDQ export, or of a dynamic plan); "
                    "re-run the quantization to export it");
  try {
    return nlohmann::json::parse(meta->second);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": malformed \"qdq\" metadata: " + e.what());
  }
}

}  // namespace

ActivationParams qdq_activation_params(const SafetensorsFile& file, const std::string& path,
                                       Int8ModelOptions* options) {
  const nlohmann::json j = qdq_metadata(file, path);
  ActivationParams acts;
  try {
    for (const auto& [name, p] : j.at("values").items())
      acts[name] = params_from(p);
    if (options) {
      options->per_channel_weights = j.at("per_channel_weights").get<bool>();
      options->weight_range = j.at("weight_bits").get<int>() >= 8 ? Int8WeightRange::full : Int8WeightRange::reduced;
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": malformed \"qdq\" metadata: " + e.what());
  }
  return acts;
}

QdqPlan qdq_plan_from_file(const SafetensorsFile& file, const std::string& path) {
  const nlohmann::json j = qdq_metadata(file, path);
  std::map<std::string, const Tensor*> t;
  for (const auto& [name, tensor] : file.tensors)
    t[name] = &tensor;
  auto need = [&](const std::string& name) -> const Tensor& {
    const auto it = t.find(name);
    if (it == t.end())
      throw DataError(path + ": tensor '" + name + "' named by the qdq metadata is missing");
    return *it->second;
  };
  QdqPlan plan;
  try {
    for (const auto& [name, p] : j.at("values").items())
      plan.values[name] = params_from(p);
    for (const auto& [name, info] : j.at("layers").items()) {
      QdqLayer q;
      const Tensor& w = need(name + ".weight");
      const Shape hwc = info.at("hwc_of").get<Shape>();
      q.weight_q = hwc.empty() ? w : permute_flat_columns(w, hwc, /*to_hwc=*/false);
      const Tensor& ws = need(name + ".weight_scale");
      LATHE_CHECK(ws.dtype() == DType::f32 && ws.numel() == w.dim(0), path, ": ", name, ".weight_scale is ",
                  ws.describe());
      q.weight_scale.assign(ws.data<float>(), ws.data<float>() + ws.numel());
      if (t.count(name + ".bias"))
        q.bias = need(name + ".bias");
      q.folded_bn = info.at("folded_bn").get<std::string>();
      plan.layers[name] = std::move(q);
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": malformed \"qdq\" metadata: " + e.what());
  }
  return plan;
}

}  // namespace lathe
