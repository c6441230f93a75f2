// Reading and writing the safetensors format (https://github.com/huggingface/safetensors), so that
// weights move between Lathe and PyTorch / Hugging Face tools without pickles.
// Layout: 8-byte little-endian header length N, N bytes of JSON header (padded with spaces to a
// multiple of 8), then the raw little-endian tensor bytes. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section), plus an
// optional "__metadata__" object of string -> string.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

/// Writes host tensors, in the given order, row-major contiguous whatever their strides (a
/// channels-last tensor is stored as its logical NCHW layout, as PyTorch does). Writes to a
/// temporary file in the same folder, then renames it over `path`, so a reader never sees a
/// half-written file. Names must be unique, non-empty and not "__metadata__".
/// Throws DataError when the file cannot be written, lathe::Error for bad arguments.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< in data-offset order; contiguous host tensors
  std::map<std::string, std::string> metadata;
};

/// Reads a file. Throws DataError naming the file and the problem when it is malformed: header
/// too short or too long, not JSON, unknown dtype, offsets out of range or overlapping, shape not
/// matching the byte count, metadata values that are not strings. I64 tensors (PyTorch's
/// BatchNorm num_batches_tracked) are read as s32 when every value fits, else refused.
SafetensorsFile load_safetensors(const std::string& path);

/// The safetensors spelling of a DType: "F32", "F64", "BF16", "F16", "I8", "I32", "U8".
const char* safetensors_dtype_name(DType dtype);

}  // namespace lathe
