// ReferenceBackend: plain loops for every op, in f32 and f64. It is the oracle that the oneDNN and
// CUDA backends are tested against, and the backend the double-precision gradient checks run on.
// Clarity over speed: strided indexing everywhere, so any layout of the inputs is accepted.
#pragma once

#include "engine/backend/backend.h"

namespace lathe {

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Device device() const override { return Device::cpu(); }
  bool supports(Op op, DType dtype) const override;
  std::string device_name() const override;

  void fill_zero(Tensor& t) override;
  void copy_impl(const Tensor& src, Tensor& dst) override;
  void reorder_impl(const Tensor& src, Tensor& dst) override;
  void round_to_precision(const Tensor& src, Tensor& dst, DType precision) override;

  // compressed execution (reference: reference_compressed.cpp; cpu: dnnl_int8.cpp, cpu_sparse.cpp)
  std::unique_ptr<Int8Kernel> make_int8_kernel_impl(const Int8LayerData& layer, const ConvParams* conv) override;
  std::unique_ptr<SparseMatmulKernel> make_sparse_matmul_impl(const CsrMatrix& a,
                                                              const SparseMatmulOptions& options) override;
  void quantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) override;
  void dequantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) override;
  void int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst) override;
  void int8_relu_impl(Tensor& t, int32_t zero_point) override;
  void linear_forward_impl(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                           PostOp post) override;
  void linear_backward_data_impl(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) override;
  void linear_backward_weights_impl(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                    Tensor* diff_bias) override;

  void conv2d_forward_impl(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                           Tensor& dst, PostOp post) override;
  void conv2d_backward_data_impl(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                 Tensor& diff_src) override;
  void conv2d_backward_weights_impl(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                    Tensor& diff_weights, Tensor* diff_bias) override;

  void maxpool2d_forward_impl(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) override;
  void maxpool2d_backward_impl(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                               Tensor& diff_src) override;

  void relu_forward_impl(const Tensor& src, Tensor& dst) override;
  void relu_backward_impl(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) override;
  void add_impl(const Tensor& a, const Tensor& b, Tensor& dst) override;
  void axpy_impl(double alpha, const Tensor& src, Tensor& dst) override;
  void scale_impl(Tensor& t, double alpha) override;

  void batchnorm_forward_training_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                       const Tensor& beta, Tensor& dst, Tensor& save_mean, Tensor& save_invstd,
                                       Tensor& running_mean, Tensor& running_var) override;
  void batchnorm_forward_inference_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                        const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                        Tensor& dst) override;
  void batchnorm_backward_impl(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma, const Tensor& save_mean,
                               const Tensor& save_invstd, Tensor& diff_src, Tensor& diff_gamma,
                               Tensor& diff_beta) override;
  void dropout_forward_impl(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) override;
  void dropout_backward_impl(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) override;

  LossResult softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                        double grad_scale) override;

  void sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) override;
  void adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) override;

  double sum_impl(const Tensor& t) override;
  double sum_squares_impl(const Tensor& t) override;
};

/// The CPU model name from /proc/cpuinfo ("unknown CPU" when absent).
std::string cpu_model_name();

}  // namespace lathe
