// The reference backend's compressed execution, the oracle of the others: INT8 linear/conv2d in
// plain integer loops (reference_int8.h), the CSR product with double accumulation
// (spmm_reference), and the host (de)quantization, integer max pooling and ReLU loops, which the
// cpu backend inherits.
#include <algorithm>

#include "engine/backend/cpu/int8_pool.h"
#include "engine/backend/cpu/reference_backend.h"
#include "engine/backend/cpu/reference_int8.h"
#include "engine/backend/cpu/spmm.h"

namespace lathe {

namespace {

class ReferenceInt8Kernel final : public Int8Kernel {
 public:
  ReferenceInt8Kernel(const Int8LayerData& layer, const ConvParams* conv) : Int8Kernel(layer, conv, Device::cpu()) {}
  std::string implementation() const override { return "reference integer loops"; }

 protected:
  Tensor run(const Tensor& src) override {
    return is_conv() ? int8_conv2d_reference(layer(), conv_params(), src) : int8_linear_reference(layer(), src);
  }
};

class ReferenceSparseMatmul final : public SparseMatmulKernel {
 public:
  explicit ReferenceSparseMatmul(const CsrMatrix& a) : SparseMatmulKernel(a, Device::cpu()) {}
  std::string implementation() const override { return "reference loops (double accumulation)"; }

 protected:
  void run_impl(const SpmmArgs& args) override { spmm_reference(matrix(), args); }
};

}  // namespace

std::unique_ptr<Int8Kernel> ReferenceBackend::make_int8_kernel_impl(const Int8LayerData& layer,
                                                                    const ConvParams* conv) {
  return std::make_unique<ReferenceInt8Kernel>(layer, conv);
}

std::unique_ptr<SparseMatmulKernel> ReferenceBackend::make_sparse_matmul_impl(const CsrMatrix& a,
                                                                              const SparseMatmulOptions&) {
  return std::make_unique<ReferenceSparseMatmul>(a);
}

void ReferenceBackend::quantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) {
  // Elementwise in memory order needs one dense layout on both sides.
  const Tensor x = src.is_dense() && src.strides() == dst.strides() ? src : [&] {
    Tensor t = Tensor::empty(dst.shape(), DType::f32, Device::cpu(), dst.format());
    src.copy_to(t);
    return t;
  }();
  LATHE_CHECK(dst.is_dense(), "quantize: dst must be dense, got ", dst.describe());
  const float* in = static_cast<const float*>(x.raw());
  const float scale = params.scale[0];
  const int32_t zp = params.zero_point[0], qmin = params.qmin(), qmax = params.qmax();
  const int64_t n = x.numel();
  if (params.is_signed) {
    int8_t* out = static_cast<int8_t*>(dst.raw());
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<int8_t>(quantize_value(in[i], scale, zp, qmin, qmax));
  } else {
    uint8_t* out = static_cast<uint8_t*>(dst.raw());
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<uint8_t>(quantize_value(in[i], scale, zp, qmin, qmax));
  }
}

void ReferenceBackend::dequantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) {
  const Tensor f = lathe::dequantize(src, params);
  f.copy_to(dst);
}

void ReferenceBackend::int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst) {
  int8_maxpool2d_into(src, p, dst);
}

void ReferenceBackend::int8_relu_impl(Tensor& t, int32_t zero_point) { int8_relu_inplace(t, zero_point); }

}  // namespace lathe
