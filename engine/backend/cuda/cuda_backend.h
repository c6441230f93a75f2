// CudaBackend: every Backend op for f32 tensors in the memory of one CUDA device. Dense layers run
// on cuBLAS (cublas_ops.cpp), convolutions on cuDNN (cudnn_ops.cpp), everything else on our kernels
// in kernels/. All work is issued on one stream owned by the backend's CudaContext; ops return
// without waiting, except those that hand a value to the host (loss, sums) and copies to host
// memory. TF32 is off by default so results match ReferenceBackend to f32 rounding.
// Not thread-safe: one backend per thread (several backends may share a device).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "engine/backend/backend.h"

namespace lathe::cuda {

class CudaContext;

/// Registers the CUDA backend factory and one caching allocator per visible device with the engine
/// (lathe::register_backend("cuda", ...), lathe::register_allocator). Idempotent; safe without a driver.
void register_backend();
/// Number of usable CUDA devices: 0, never an exception, when there is no driver or no device.
int device_count();
/// Why device_count() is 0 (the CUDA runtime's message), or "" when devices exist.
std::string device_unavailable_reason();

class CudaBackend final : public Backend {
 public:
  /// Throws lathe::Error when the device cannot be opened.
  explicit CudaBackend(int device_index = 0);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  Device device() const override;
  bool supports(Op op, DType dtype) const override;
  /// What supports() answers on a device of compute capability `cc` (major * 10 + minor).
  static bool supports_on(Op op, DType dtype, int cc);
  /// This device's compute capability, major * 10 + minor (90 on an H100/H200).
  int compute_capability() const;
  std::string device_name() const override;
  int multiprocessors() const override;

  void fill_zero(Tensor& t) override;
  void copy_impl(const Tensor& src, Tensor& dst) override;
  void reorder_impl(const Tensor& src, Tensor& dst) override;
  void synchronize() override;
  MemoryFormat preferred_conv_format() const override { return MemoryFormat::contiguous; }

  void linear_forward_impl(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                           PostOp post = PostOp::none) override;
  void linear_backward_data_impl(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) override;
  void linear_backward_weights_impl(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                    Tensor* diff_bias) override;

  void conv2d_forward_impl(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                           Tensor& dst, PostOp post = PostOp::none) override;
  void conv2d_backward_data_impl(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                 Tensor& diff_src) override;
  void conv2d_backward_weights_impl(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                    Tensor& diff_weights, Tensor* diff_bias) override;

  /// workspace: s32 argmax per output, as ReferenceBackend's (allocated on this device on first use).
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
  /// The mask comes from a counter-based hash of (seed, element index) (kernels/dropout.cuh), not
  /// from ReferenceBackend's Rng stream: same statistics, different mask.
  void dropout_forward_impl(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) override;
  void dropout_backward_impl(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) override;

  LossResult softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                        double grad_scale) override;

  void sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) override;
  void adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) override;

  double sum_impl(const Tensor& t) override;
  double sum_squares_impl(const Tensor& t) override;

  // ---- compressed execution (cuda_compressed.cpp); dequantize is not implemented here ----
  std::unique_ptr<Int8Kernel> make_int8_kernel_impl(const Int8LayerData& layer, const ConvParams* conv) override;
  std::unique_ptr<SparseMatmulKernel> make_sparse_matmul_impl(const CsrMatrix& a,
                                                              const SparseMatmulOptions& options) override;
  void quantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) override;
  void int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst) override;
  void int8_relu_impl(Tensor& t, int32_t zero_point) override;

  // ---- CUDA specifics (benchmarks, tests, NCCL) ----
  cudaStream_t stream() const;
  CudaContext& context() { return *m_ctx; }
  /// TF32 tensor cores for GEMMs and convolutions (off by default: parity with the f32 reference).
  void set_allow_tf32(bool allow);
  /// Time cuDNN's algorithms once per shape (cudnnFind) instead of trusting its heuristics.
  void set_benchmark_conv_algos(bool on);

 private:
  std::unique_ptr<CudaContext> m_ctx;
};

}  // namespace lathe::cuda
