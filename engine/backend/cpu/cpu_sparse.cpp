// The cpu backend's CSR x dense product: the scalar / AVX2 + FMA / AVX-512 kernels of spmm.h, split
// over OpenMP threads by nonzeros (or on the calling thread inside a parallel region).
#include "engine/backend/cpu/dnnl_backend.h"
#include "engine/backend/cpu/spmm.h"

namespace lathe {

namespace {

class CpuSparseMatmul final : public SparseMatmulKernel {
 public:
  CpuSparseMatmul(const CsrMatrix& a, SpmmIsa isa) : SparseMatmulKernel(a, Device::cpu()), m_isa(isa) {
    LATHE_CHECK(spmm_isa_supported(isa), "sparse_matmul: this CPU does not support ", spmm_isa_name(isa));
  }
  std::string implementation() const override { return std::string("CSR kernel ") + spmm_isa_name(m_isa); }

 protected:
  void run_impl(const SpmmArgs& args) override { spmm(matrix(), args, m_isa); }

 private:
  SpmmIsa m_isa;
};

}  // namespace

std::unique_ptr<SparseMatmulKernel> DnnlBackend::make_sparse_matmul_impl(const CsrMatrix& a,
                                                                         const SparseMatmulOptions& options) {
  return std::make_unique<CpuSparseMatmul>(a, options.pin_isa ? options.isa : spmm_best_isa());
}

}  // namespace lathe
