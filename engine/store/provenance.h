// Where a run's model came from and where it went, from what the store holds: the model_source
// event (an imported ONNX file, its sha256 and opset), else the config's zoo model; and the model
// files the run wrote (weights, ONNX f32 and INT8 QDQ exports) with the sha256 the store computed;
// a distillation teacher (the distill event) is a source too.
// One description for the report's Provenance section and the compare view's rows.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe {

struct ProvenanceRow {
  bool incoming = false;  ///< true: where the model came from; false: a file it went to
  std::string what;       ///< "ONNX model (opset 17)", "ONNX INT8 (QDQ)", "weights (model-f32)", ...
  std::string file;       ///< empty when there is none (a zoo model)
  std::string sha256;     ///< empty when unknown; "missing" for a file gone when recorded
};

/// The rows of one run: the source first (and a distillation teacher, from the distill event),
/// then its model files in recording order (checkpoints left out); a path written more than once
/// (a resumed run saves its model at every stop) is one row with its last write's sha256 and
/// ", the last of N writes" in `what`. `params` is the run's flattened config (Store::params).
std::vector<ProvenanceRow> run_provenance(const std::vector<EventRecord>& events,
                                          const std::vector<ArtifactRecord>& artifacts,
                                          const std::vector<std::pair<std::string, std::string>>& params);

}  // namespace lathe
