// The cuda backend's compressed execution: INT8 linear/conv2d on cuBLASLt (cuda_int8_linear.h),
// the CSR product on cuSPARSE (cusparse_ops.h, bias and ReLU applied after by kernels/bias_act),
// quantization with the CPU's rounding and integer max pooling / ReLU (kernels/int8_*.cu). The
// contracts are checked by Backend and the kernel base classes before these run.
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/cuda_context.h"
#include "engine/backend/cuda/cuda_int8_linear.h"
#include "engine/backend/cuda/cusparse_ops.h"
#include "kernels/bias_act.cuh"
#include "kernels/int8_gemm_io.cuh"
#include "kernels/int8_pool.cuh"

namespace lathe::cuda {

namespace {

class CudaInt8Kernel final : public Int8Kernel {
 public:
  CudaInt8Kernel(CudaBackend& be, const Int8LayerData& layer, const ConvParams* conv)
      : Int8Kernel(layer, conv, be.device()) {
    if (conv)
      m_conv = std::make_unique<CudaInt8Conv2d>(be, layer, *conv);
    else
      m_linear = std::make_unique<CudaInt8Linear>(be, layer);
  }
  std::string implementation() const override {
    return m_conv ? "cuBLASLt int8 GEMM over an 8-bit im2col" : "cuBLASLt int8 GEMM";
  }

 protected:
  Tensor run(const Tensor& src) override { return m_conv ? m_conv->forward(src) : m_linear->forward(src); }

 private:
  std::unique_ptr<CudaInt8Linear> m_linear;
  std::unique_ptr<CudaInt8Conv2d> m_conv;
};

class CudaSparseMatmul final : public SparseMatmulKernel {
 public:
  CudaSparseMatmul(CudaBackend& be, const CsrMatrix& a) : SparseMatmulKernel(a, be.device()), m_be(be), m_csr(be, a) {}
  std::string implementation() const override { return "cuSPARSE SpMM"; }

 protected:
  void run_impl(const SpmmArgs& x) override {
    m_csr.spmm_rows(x.b, x.ldb, x.c, x.ldc, x.n);
    if (!x.bias && !x.relu)
      return;
    LATHE_CHECK(x.ldc == x.n, "sparse_matmul on cuda: bias / ReLU need dense C rows (ldc ", x.ldc, " != n ", x.n, ")");
    CudaContext& ctx = m_be.context();
    const StreamScope scope = ctx.activate();
    LATHE_CUDA_CHECK(kernels::bias_act(ctx.stream(), x.c, 1, matrix().rows, x.n, matrix().rows * x.n, x.bias, x.relu));
  }

 private:
  CudaBackend& m_be;
  CusparseCsr m_csr;
};

}  // namespace

std::unique_ptr<Int8Kernel> CudaBackend::make_int8_kernel_impl(const Int8LayerData& layer, const ConvParams* conv) {
  return std::make_unique<CudaInt8Kernel>(*this, layer, conv);
}

std::unique_ptr<SparseMatmulKernel> CudaBackend::make_sparse_matmul_impl(const CsrMatrix& a,
                                                                         const SparseMatmulOptions&) {
  return std::make_unique<CudaSparseMatmul>(*this, a);
}

void CudaBackend::quantize_impl(const Tensor& src, const QuantParams& p, Tensor& dst) {
  LATHE_CHECK(src.is_dense() && dst.is_dense() && src.strides() == dst.strides(),
              "quantize on cuda: src and dst need one dense layout, got ", src.describe(), " -> ", dst.describe());
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::int8_quantize(m_ctx->stream(), static_cast<const float*>(src.raw()), src.numel(),
                                          p.scale[0], p.zero_point[0], p.qmin(), p.qmax(), !p.is_signed, dst.raw()));
}

void CudaBackend::int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst) {
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::int8_maxpool_nhwc(m_ctx->stream(), src.raw(), src.dtype() == DType::s8, src.dim(0),
                                              src.dim(1), src.dim(2), src.dim(3), p.kernel_h, p.kernel_w, p.stride_h,
                                              p.stride_w, p.pad_h, p.pad_w, dst.dim(2), dst.dim(3), dst.raw()));
}

void CudaBackend::int8_relu_impl(Tensor& t, int32_t zero_point) {
  const StreamScope scope = m_ctx->activate();
  LATHE_CUDA_CHECK(kernels::int8_relu(m_ctx->stream(), t.raw(), t.dtype() == DType::s8, t.numel(), zero_point));
}

}  // namespace lathe::cuda
