// The compressed model file: safetensors in which every pruned weight is stored in its smallest
// encoding (sparse_format.h), so a pruned model's model/bytes is the bytes it really needs.
//   CSR:     <name>.csr_row_ptr  I32 [rows + 1]
//            <name>.csr_col_idx  U8 [nnz, 2] (little-endian u16; cols < 65536) or I32 [nnz]
//            <name>.csr_values   F32 [nnz]
//   bitmask: <name>.bitmask      U8 [ceil(numel / 8)] (row-major, least significant bit first)
//            <name>.bitmask_values F32 [nnz]
// with metadata "lathe.sparse.<name>" = "<csr|bitmask> <shape as JSON>" naming the dense shape.
// Everything else (biases, dense-enough weights, buffers) is stored as in save_model. A weight is
// viewed as [dim0, numel / dim0]; values are f32.
#pragma once

#include <map>
#include <string>

#include "engine/nn/model.h"

namespace lathe {

struct SparseSaveResult {
  int64_t file_bytes = 0;     ///< size of the file written
  int64_t dense_bytes = 0;    ///< what the same tensors take as dense f32 payload
  int64_t sparse_layers = 0;  ///< weights stored in a sparse encoding
};

/// Writes `model` to `path` (atomically, like save_model). An empty path writes nothing and
/// returns the exact size the file would have.
SparseSaveResult save_sparse_model(Model& model, Backend& backend, const std::string& path,
                                   const std::map<std::string, std::string>& metadata = {});

/// Loads a file written by save_sparse_model (or a plain save_model file) into a model whose
/// params exist, decoding sparse weights back to dense. Strict like load_model_weights: every
/// parameter and buffer present with its shape, no unknown tensors; DataError names the problem.
void load_sparse_model_weights(Model& model, Backend& backend, const std::string& path);

}  // namespace lathe
