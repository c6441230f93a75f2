// Sparse storage of a pruned weight, so pruning shows up as real bytes: CSR and bitmask + values,
// with their exact serialized sizes and a lossless encode/decode. A weight is viewed as a matrix
// [dim0, numel / dim0] (Conv2d [O, C*KH*KW]); values are stored as f32 whatever the weight's dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

struct SparseEncoding {
  enum Kind { dense, csr, bitmask } kind = dense;
  int64_t bytes = 0;
};

/// Dense: numel f32 values.
int64_t dense_bytes(const Tensor& weight);
/// CSR: (rows + 1) s32 row pointers, then nnz column indices (u16 when the row length < 65536,
/// else s32), then nnz f32 values.
int64_t csr_bytes(const Tensor& weight);
/// Bitmask: ceil(numel / 8) bytes with one bit per element (row-major, least significant bit first),
/// then nnz f32 values.
int64_t bitmask_bytes(const Tensor& weight);
/// The smallest of dense, CSR and bitmask (ties go to the earlier of those three).
SparseEncoding smallest_encoding(const Tensor& weight);

/// A serialized weight: the payload described above, exactly `*_bytes(weight)` long.
struct EncodedWeight {
  SparseEncoding::Kind kind = SparseEncoding::dense;
  Shape shape;
  std::vector<uint8_t> bytes;
};

/// Serializes a host tensor (any float dtype, any layout). Exact zeros (also -0) are not stored.
EncodedWeight encode(const Tensor& weight, SparseEncoding::Kind kind);
/// Back to a contiguous f32 host tensor; throws DataError when the payload is inconsistent.
Tensor decode(const EncodedWeight& encoded);

}  // namespace lathe
