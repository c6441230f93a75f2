// cuSPARSE SpMM for pruned weights on the GPU: a CSR weight uploaded once, then C = A * B for
// row-major dense B [cols, n] and C [rows, n] (Linear: B = x^T; Conv2d: B = the im2col matrix), the
// GPU counterpart of the CPU kernels in engine/backend/cpu/spmm.h. The handle and descriptors
// live in the object, bound to the context's stream (no globals).
#pragma once

#include <cusparse.h>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/formats/csr_matrix.h"

namespace lathe::cuda {

class CusparseCsr {
 public:
  /// Uploads `a` to the backend's device (s32 indices, f32 values). Throws lathe::Error on a
  /// cuSPARSE or CUDA failure, with the statement and status.
  CusparseCsr(CudaBackend& backend, const CsrMatrix& a);
  ~CusparseCsr();
  CusparseCsr(const CusparseCsr&) = delete;
  CusparseCsr& operator=(const CusparseCsr&) = delete;

  /// c [rows, n] = A * b [cols, n]; both f32, row-major contiguous, on this device. Stream-ordered.
  /// Every element of c is written (with nnz = 0: zeros, without calling cuSPARSE).
  void spmm(const Tensor& b, Tensor& c);
  /// The same on raw device rows: b [cols, n] with row stride ldb, c [rows, n] with row stride ldc.
  void spmm_rows(const float* b, int64_t ldb, float* c, int64_t ldc, int64_t n);

  int64_t rows() const { return m_rows; }
  int64_t cols() const { return m_cols; }
  int64_t nnz() const { return m_nnz; }

 private:
  CudaBackend& m_be;
  int64_t m_rows, m_cols, m_nnz;
  Tensor m_row_ptr, m_col_idx, m_values, m_workspace;
  cusparseHandle_t m_handle = nullptr;
  cusparseSpMatDescr_t m_descr = nullptr;
};

}  // namespace lathe::cuda
