// The INT8 model's QDQ ONNX form (onnx_export.h's QdqPlan) from an Int8Model in memory, and from
// its saved file (model_int8.safetensors: the s8 weights, scales and bias, plus a "qdq" metadata
// entry naming the quantized values, folded BatchNorms and permuted weight columns), so the quant
// stage (output.onnx) and `lathe-cli export-model` on a finished run write the same graph.
#pragma once

#include <string>

#include "engine/compress/quant/int8_model.h"
#include "engine/io/onnx/onnx_export.h"
#include "engine/nn/safetensors.h"

namespace lathe {

/// The values an Int8Model quantizes and its INT8 layers (weights in the f32 layers' column order).
/// ConfigError for a dynamic plan (its activation scales are taken per batch, so there are none to write).
QdqPlan qdq_plan_of(const Int8Model& model);

/// The metadata entry Int8Model::save gets under the key "qdq" (JSON) for qdq_plan_from_file.
std::string qdq_plan_metadata(const Int8Model& model);

/// The QdqPlan of a saved INT8 file. DataError naming `path` when it has no "qdq" entry (a file of
/// a Lathe before QDQ export, or a dynamic plan) or its tensors do not match it.
QdqPlan qdq_plan_from_file(const SafetensorsFile& file, const std::string& path);

/// The activation parameters (by tap) and options an INT8 file was made with: with the same f32
/// weights, Int8Model(model, be, acts, *options) rebuilds the same INT8 model (bench/onnx_logits
/// gives Lathe's INT8 logits of a run this way). DataError as qdq_plan_from_file.
ActivationParams qdq_activation_params(const SafetensorsFile& file, const std::string& path, Int8ModelOptions* options);

}  // namespace lathe
