// In-memory CSR form of a pruned weight for the sparse kernels: s32 row pointers and column
// indices, f32 values. A weight is viewed as [dim0, numel / dim0] (Conv2d [OC, IC*KH*KW]), the same
// view sparse_format.h serializes; this is the compute form, that one the storage form.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace lathe {

struct CsrMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<int32_t> row_ptr;  ///< rows + 1 entries, row_ptr[0] = 0
  std::vector<int32_t> col_idx;  ///< nnz entries, increasing within a row
  std::vector<float> values;     ///< nnz entries

  int64_t nnz() const { return static_cast<int64_t>(values.size()); }
  /// Fraction of stored entries (nnz / (rows * cols)); 0 for an empty matrix.
  double density() const;

  /// From a host tensor of any float dtype and layout, viewed as [dim0, numel / dim0]; exact zeros
  /// (also -0) are dropped. Throws lathe::Error for a device tensor or more than 2^31 - 1 entries.
  static CsrMatrix from_dense(const Tensor& weight);
  /// Back to a contiguous f32 host tensor of `shape` (numel must be rows * cols).
  Tensor to_dense(const Shape& shape) const;
  /// Checks the invariants (sizes, monotone row pointers, columns in range and increasing);
  /// throws DataError naming the first violation.
  void validate() const;
};

}  // namespace lathe
