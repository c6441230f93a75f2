// A finished run's model written as ONNX: which weights a run can be exported from (the f32 kinds
// it recorded, or its INT8 file as QDQ) and the export itself, from the run store. lathe-cli
// export-model and the desktop app's "Export model (ONNX)..." both call this, so the two faces
// write the same bytes for the same run and artifact.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/store/store.h"

namespace lathe {

/// One kind of weights a run may be exported from.
struct ModelExportChoice {
  std::string kind;        ///< "model", "model-f32", "pruned", "lowrank" or "model-int8"
  std::string label;       ///< for a menu: what the file will be
  bool available = false;  ///< the run recorded the artifact (and, for INT8, the f32 graph beside it)
  std::string why_not;     ///< when not available: what is missing, said for the user
  std::string path;        ///< the weights file when available
};

/// The kinds of f32 weights a run records, the later in a run the more final.
const std::vector<std::string>& f32_export_kinds();

/// Every kind (f32 kinds, then model-int8) with whether run `run_id` can be exported from it.
std::vector<ModelExportChoice> model_export_choices(const Store& store, const std::string& run_id);

/// The kind export_run_model uses when none is named: model-int8 on a run that recorded one, else
/// the f32 artifact recorded last; "" when the run has no weights at all.
std::string default_model_export_kind(const Store& store, const std::string& run_id);

struct ModelExportResult {
  std::string path;          ///< the file written
  int64_t bytes = 0;
  std::string kind;          ///< the artifact kind exported
  std::string weights_path;  ///< the weights file it came from
  std::string summary;       ///< one line for the user ("wrote FILE (N bytes, f32, from ...)")
};

/// Writes run `run_id`'s `kind` weights (""= default_model_export_kind) as ONNX to `out`: the
/// run's graph (its config, or the ONNX file it was imported from) with those weights; INT8 as QDQ
/// (the model-f32 graph with the INT8 file's weights and scales). `format` must be "onnx".
/// ConfigError for a bad format or kind (naming the allowed ones), DataError for a run without
/// the artifact (naming the run and the kind) or unreadable files.
ModelExportResult export_run_model(const Store& store, const std::string& run_id, const std::string& kind,
                                   const std::string& out, const std::string& format = "onnx");

}  // namespace lathe
