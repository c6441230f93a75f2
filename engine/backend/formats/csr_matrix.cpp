// CsrMatrix conversions and invariant checks.
#include "engine/backend/formats/csr_matrix.h"

#include <limits>
#include <string>

namespace lathe {

double CsrMatrix::density() const {
  const int64_t n = rows * cols;
  return n ? static_cast<double>(nnz()) / static_cast<double>(n) : 0.0;
}

CsrMatrix CsrMatrix::from_dense(const Tensor& weight) {
  LATHE_CHECK(weight.device().is_cpu(), "CsrMatrix: ", weight.describe(), " is not a host tensor");
  const int64_t n = weight.numel();
  LATHE_CHECK(n < std::numeric_limits<int32_t>::max(), "CsrMatrix: ", weight.describe(),
              " has too many entries for s32 indices");
  CsrMatrix m;
  m.rows = weight.ndim() == 0 ? 1 : weight.dim(0);
  m.cols = m.rows ? n / m.rows : 0;
  const Tensor w = weight.is_contiguous() ? weight : weight.contiguous_copy();
  m.row_ptr.reserve(m.rows + 1);
  m.row_ptr.push_back(0);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const double v = w.at_flat(r * m.cols + c);
      if (v == 0.0)
        continue;
      m.col_idx.push_back(static_cast<int32_t>(c));
      m.values.push_back(static_cast<float>(v));
    }
    m.row_ptr.push_back(static_cast<int32_t>(m.values.size()));
  }
  return m;
}

Tensor CsrMatrix::to_dense(const Shape& shape) const {
  LATHE_CHECK(shape_numel(shape) == rows * cols, "CsrMatrix::to_dense: ", shape_str(shape), " does not hold ", rows,
              "x", cols);
  Tensor out = Tensor::zeros(shape, DType::f32);
  float* dst = out.data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int32_t k = row_ptr[r]; k < row_ptr[r + 1]; ++k)
      dst[r * cols + col_idx[k]] = values[k];
  return out;
}

void CsrMatrix::validate() const {
  if (rows < 0 || cols < 0 || static_cast<int64_t>(row_ptr.size()) != rows + 1)
    throw DataError("CSR matrix: " + std::to_string(row_ptr.size()) + " row pointers for " + std::to_string(rows) +
                    " rows (need rows + 1)");
  if (row_ptr[0] != 0 || row_ptr.back() != nnz() || col_idx.size() != values.size())
    throw DataError("CSR matrix: row pointers end at " + std::to_string(row_ptr.back()) + " but there are " +
                    std::to_string(values.size()) + " values and " + std::to_string(col_idx.size()) +
                    " column indices");
  for (int64_t r = 0; r < rows; ++r) {
    if (row_ptr[r + 1] < row_ptr[r])
      throw DataError("CSR matrix: row pointers decrease at row " + std::to_string(r));
    for (int32_t k = row_ptr[r]; k < row_ptr[r + 1]; ++k) {
      if (col_idx[k] < 0 || col_idx[k] >= cols)
        throw DataError("CSR matrix: column index " + std::to_string(col_idx[k]) + " in row " + std::to_string(r) +
                        " is outside [0, " + std::to_string(cols) + ")");
      if (k > row_ptr[r] && col_idx[k] <= col_idx[k - 1])
        throw DataError("CSR matrix: column indices of row " + std::to_string(r) + " do not increase");
    }
  }
}

}  // namespace lathe
