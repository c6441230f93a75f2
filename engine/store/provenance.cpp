// Provenance rows of a run (see provenance.h).
#include "engine/store/provenance.h"

#include <map>

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
  for (const EventRecord& e : events)
    if (e.kind == "distill" && e.fields.is_object() && e.fields.contains("teacher")) {
      const std::string teacher = e.fields["teacher"].is_string() ? e.fields["teacher"].get<std::string>() : "";
      const std::string origin = e.fields.value("teacher_origin", std::string());
      rows.push_back({true, "distillation teacher" + (origin.empty() ? "" : ": " + origin), teacher,
                      e.fields.value("teacher_sha256", std::string())});
    }
  // A path written several times (a resumed or spot-interrupted run saves its model at every
  // stop) holds its last write: one row, with that write's sha256, at the first write's place.
  std::map<std::string, size_t> row_of_path;
  std::map<std::string, int> writes;
  for (const ArtifactRecord& a : artifacts) {
    const std::string what = model_file_kind(a.kind);
    if (what.empty())
      continue;
    const std::string sha = a.bytes < 0 ? "missing" : a.sha256;
    const auto it = row_of_path.find(a.path);
    if (it == row_of_path.end()) {
      row_of_path[a.path] = rows.size();
      rows.push_back({false, what, a.path, sha});
    } else {
      rows[it->second].what = what;
      rows[it->second].sha256 = sha;
    }
    ++writes[a.path];
  }
  for (ProvenanceRow& r : rows)
    if (!r.incoming && writes[r.file] > 1)
      r.what += ", the last of " + std::to_string(writes[r.file]) + " writes";
  return rows;
}

}  // namespace lathe
