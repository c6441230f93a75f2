// Training checkpoints on disk: one folder per checkpoint, <dir>/step-<000000001234>/, holding
//   tensors.safetensors  weights, optimizer state, loss scaler, stage tensors (host copies)
//   state.json           step, epoch, position in the epoch, LR-schedule position, RNG streams,
//                        stage name and state, store run id, format version (what the caller puts)
//   MANIFEST.json        format, step, and each file's size and sha256, written last
// A checkpoint is built in a temporary folder (every file fsync'd), renamed into place, and the
// parent folder fsync'd, so a kill at any moment leaves either the whole checkpoint or none. The
// newest `keep` are kept. Reading takes the newest one whose files match their manifest (a torn
// or bit-flipped file is detected by size and sha256) and says which ones it passed over and why.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

/// Format written in MANIFEST.json and state.json; a reader refuses a newer one.
inline constexpr int kCheckpointFormat = 1;

struct CheckpointData {
  nlohmann::json state = nlohmann::json::object();      ///< everything that is not a tensor
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< host tensors, unique names
};

struct CheckpointInfo {
  std::string path;  ///< the checkpoint's folder
  int64_t step = 0;
  int64_t bytes = 0;   ///< all files together
  double write_s = 0;  ///< seconds write_checkpoint took (ckpt/write_s)
};

/// Writes `data` as the checkpoint of global step `step` under `dir` (created if missing), then
/// deletes all but the newest `keep` (>= 1). A checkpoint of the same step is replaced. Adds
/// "format" and "step" to the state. Throws lathe::Error naming the file on a failed write (the
/// older checkpoints are then untouched).
CheckpointInfo write_checkpoint(const std::string& dir, int64_t step, const CheckpointData& data, int64_t keep);

/// Removes the temporary folders (".tmp-step-N-PID") that writers other than this process left
/// under `dir`: killed in the middle of a write. Only the run's one writer may call it (the
/// checkpoint writer after each write, rank 0 when it resumes), never while another process writes.
void remove_stale_checkpoint_temporaries(const std::string& dir);

/// The checkpoint folders under `dir`, oldest first (by step); empty when `dir` does not exist.
std::vector<std::string> list_checkpoints(const std::string& dir);

/// "" when the folder's files match its manifest, else why not ("tensors.safetensors has 120
/// bytes, the manifest says 4096 (truncated?)", "... sha256 differs (corrupt)", ...).
std::string verify_checkpoint(const std::string& folder);

struct LoadedCheckpoint {
  CheckpointData data;
  CheckpointInfo info;
  /// One line per newer checkpoint passed over: "checkpoint DIR is not usable (REASON); using
  /// the previous one, step N".
  std::vector<std::string> skipped;
};

/// The newest valid checkpoint under `dir`, or nullopt when there is none (`skipped_when_none`,
/// if given, then lists the invalid ones). A checkpoint of a newer format counts as invalid, with
/// that reason.
std::optional<LoadedCheckpoint> load_newest_checkpoint(const std::string& dir,
                                                       std::vector<std::string>* skipped_when_none = nullptr);

}  // namespace lathe
