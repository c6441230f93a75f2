// Provenance rows of a run (see provenance.h).
#include "engine/store/provenance.h"

namespace lathe {

namespace {

std::string param_of(const std::vector<std::pair<std::string, std::string>>& params, const std::string& key) {
  for (const auto& [k, v] : params)
    if (k == key)
      return v;
  return "";
}

/// What an artifact of this kind is ("" for files that are not a model).
std::string model_file_kind(const std::string& kind) {
  if (kind == "onnx")
    return "ONNX f32";
  if (kind == "onnx-int8")
    return "ONNX INT8 (QDQ)";
  if (kind.rfind("checkpoint", 0) == 0)
    return "";
  return "weights (" + kind + ")";
}

}  // namespace

std::vector<ProvenanceRow> run_provenance(const std::vector<EventRecord>& events,
                                          const std::vector<ArtifactRecord>& artifacts,
                                          const std::vector<std::pair<std::string, std::string>>& params) {
  std::vector<ProvenanceRow> rows;
  for (const EventRecord& e : events)
    if (e.kind == "model_source" && e.fields.is_object()) {
      const std::string format = e.fields.value("format", std::string("onnx"));
      const std::string opset = e.fields.contains("opset") ? e.fields["opset"].dump() : "?";
      rows.push_back({true, format == "onnx" ? "ONNX model (opset " + opset + ")" : format,
                      e.fields.value("file", std::string()), e.fields.value("sha256", std::string())});
    }
  if (rows.empty()) {
    const std::string zoo = param_of(params, "model.zoo");
    rows.push_back(
        {true, zoo.empty() ? "the config's model" : "zoo model " + zoo + " (initialised by the run)", "", ""});
  }
  for (const ArtifactRecord& a : artifacts) {
    const std::string what = model_file_kind(a.kind);
    if (!what.empty())
      rows.push_back({false, what, a.path, a.bytes < 0 ? "missing" : a.sha256});
  }
  return rows;
}

}  // namespace lathe
