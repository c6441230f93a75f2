// DnnlBackend: the fast CPU backend. Matmul, convolution (forward, backward-data, backward-weights),
// pooling and eltwise run as oneDNN primitives, cached by their descriptors; the light ops (loss,
// optimizer updates, reductions) are vectorised loops over dense f32 memory. Conv activations are
// kept channels-last (NHWC), the layout oneDNN's AVX-512 kernels run without reorders. Where oneDNN
// 2.6 is slow for the training step's shapes, Lathe's own kernels run instead (set_own_kernels).
// Mixed precision: where the CPU has bf16 instructions (AVX512_BF16, AMX), linear and conv also run
// bf16 src/weights/diff_dst with f32 outputs (supports(op, bf16) says so); f16 has no oneDNN 2.6 CPU
// kernels, and bf16 elsewhere is emulated by the layers through round_to_precision.
#pragma once

#include <memory>

#include "engine/backend/cpu/reference_backend.h"

namespace lathe {

class DnnlBackend final : public ReferenceBackend {
 public:
  DnnlBackend();
  ~DnnlBackend() override;

  std::string name() const override { return "cpu"; }
  bool supports(Op op, DType dtype) const override;
  bool writes_matmul_results_in(DType dtype) const override;
  MemoryFormat preferred_conv_format() const override { return MemoryFormat::channels_last; }

  void reorder_impl(const Tensor& src, Tensor& dst) override;
  /// Vectorised (F16C for f16 where present) on dense tensors of one layout.
  void round_to_precision(const Tensor& src, Tensor& dst, DType precision) override;

  // compressed execution (reference: reference_compressed.cpp; cpu: dnnl_int8.cpp, cpu_sparse.cpp)
  std::unique_ptr<Int8Kernel> make_int8_kernel_impl(const Int8LayerData& layer, const ConvParams* conv) override;
  void int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst) override;
  /// Parallel and vectorised (quantize_kernels.h) when src and dst hold their elements in one order.
  void quantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst) override;
  std::unique_ptr<SparseMatmulKernel> make_sparse_matmul_impl(const CsrMatrix& a,
                                                              const SparseMatmulOptions& options) override;
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

  LossResult softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                        double grad_scale) override;
  void sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) override;
  void adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) override;
  double sum_impl(const Tensor& t) override;
  double sum_squares_impl(const Tensor& t) override;

  /// Number of primitives built so far (cache misses), for tests of the cache.
  size_t primitives_created() const;

  /// Lathe's own kernels for the cases they take (on by default): the non-overlapping max pooling
  /// of maxpool_kernels.h and the bf16 single-input-channel conv of bf16_conv_c1.h. Off, oneDNN's
  /// primitives run those too: bench/profile_layers --kernels compares the two in one process.
  void set_own_kernels(bool on);
  bool own_kernels() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace lathe
