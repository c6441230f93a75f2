// CusparseCsr: upload, descriptors and cusparseSpMM with a grow-only workspace.
#include "engine/backend/cuda/cusparse_ops.h"

#include <cstring>

#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"

#define LATHE_CUSPARSE_CHECK(statement) \
  LATHE_DETAIL_LIBRARY_CHECK("cuSPARSE", statement, CUSPARSE_STATUS_SUCCESS, cusparseGetErrorString)

namespace lathe::cuda {

namespace {

template <class T>
Tensor upload(CudaBackend& be, const std::vector<T>& v, DType dtype) {
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(v.size()));  // cuSPARSE wants valid pointers
  Tensor host = Tensor::zeros({n}, dtype);
  if (!v.empty())
    std::memcpy(host.raw(), v.data(), v.size() * sizeof(T));
  Tensor dev = be.empty({n}, dtype);
  be.copy(host, dev);
  return dev;
}

}  // namespace

CusparseCsr::CusparseCsr(CudaBackend& be, const CsrMatrix& a)
    : m_be(be), m_rows(a.rows), m_cols(a.cols), m_nnz(a.nnz()) {
  a.validate();
  m_row_ptr = upload(be, a.row_ptr, DType::s32);
  m_col_idx = upload(be, a.col_idx, DType::s32);
  m_values = upload(be, a.values, DType::f32);
  LATHE_CUSPARSE_CHECK(cusparseCreate(&m_handle));
  LATHE_CUSPARSE_CHECK(cusparseSetStream(m_handle, be.context().stream()));
  LATHE_CUSPARSE_CHECK(cusparseCreateCsr(&m_descr, m_rows, m_cols, m_nnz, m_row_ptr.raw(), m_col_idx.raw(),
                                         m_values.raw(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
}

CusparseCsr::~CusparseCsr() {
  if (m_descr)
    cusparseDestroySpMat(m_descr);
  if (m_handle)
    cusparseDestroy(m_handle);
}

void CusparseCsr::spmm(const Tensor& b, Tensor& c) {
  LATHE_CHECK(b.ndim() == 2 && c.ndim() == 2 && b.dim(0) == m_cols && c.dim(0) == m_rows && b.dim(1) == c.dim(1),
              "cusparse spmm: A is ", m_rows, "x", m_cols, ", B ", b.describe(), ", C ", c.describe());
  LATHE_CHECK(b.dtype() == DType::f32 && c.dtype() == DType::f32 && b.is_contiguous() && c.is_contiguous() &&
                  !b.device().is_cpu() && !c.device().is_cpu(),
              "cusparse spmm: B and C must be contiguous f32 device tensors");
  spmm_rows(static_cast<const float*>(b.raw()), b.dim(1), static_cast<float*>(c.raw()), c.dim(1), b.dim(1));
}

void CusparseCsr::spmm_rows(const float* b, int64_t ldb, float* c, int64_t ldc, int64_t n) {
  if (n == 0 || m_rows == 0)
    return;
  const StreamScope scope = m_be.context().activate();
  if (m_nnz == 0) {
    // C = A * B is all zeros. Written here rather than left to cuSPARSE: with no stored entries,
    // whether SpMM writes C at all (beta = 0) is not something its documentation promises.
    LATHE_CUDA_CHECK(cudaMemset2DAsync(c, ldc * sizeof(float), 0, n * sizeof(float), m_rows, m_be.context().stream()));
    return;
  }
  cusparseDnMatDescr_t db = nullptr, dc = nullptr;
  LATHE_CUSPARSE_CHECK(cusparseCreateDnMat(&db, m_cols, n, ldb, const_cast<float*>(b), CUDA_R_32F, CUSPARSE_ORDER_ROW));
  LATHE_CUSPARSE_CHECK(cusparseCreateDnMat(&dc, m_rows, n, ldc, c, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  const float alpha = 1.0f, beta = 0.0f;
  size_t bytes = 0;
  try {
    LATHE_CUSPARSE_CHECK(cusparseSpMM_bufferSize(m_handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                                 CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, m_descr, db, &beta, dc,
                                                 CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT, &bytes));
    if (!m_workspace.defined() || m_workspace.nbytes() < bytes)
      m_workspace = m_be.empty({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::u8);
    LATHE_CUSPARSE_CHECK(cusparseSpMM(m_handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      &alpha, m_descr, db, &beta, dc, CUDA_R_32F, CUSPARSE_SPMM_ALG_DEFAULT,
                                      m_workspace.raw()));
  } catch (...) {
    cusparseDestroyDnMat(db);
    cusparseDestroyDnMat(dc);
    throw;
  }
  cusparseDestroyDnMat(db);
  cusparseDestroyDnMat(dc);
}

}  // namespace lathe::cuda
