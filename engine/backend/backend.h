// Backend: the ops the engine runs, on one device. Every op has a plain reference implementation
// (ReferenceBackend, the oracle); the oneDNN CPU backend and the CUDA backend must match it.
//
// Conventions (oneDNN naming): `src`, `dst`, `weights`, `bias`, `diff_*` for gradients.
// Linear: src [N, K], weights [O, K] (PyTorch layout), bias [O], dst [N, O].
// Conv2d: src [N, C, H, W], weights [O, C, KH, KW], bias [O], dst [N, O, OH, OW]; any strides (NCHW
// or channels-last) are accepted, and a backend may pick the layout of the outputs it allocates.
// Backward ops overwrite their outputs (no accumulation) unless a parameter says otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/compressed_ops.h"
#include "engine/backend/op_params.h"
#include "engine/core/tensor.h"

namespace lathe {

enum class Op : uint8_t {
  linear,
  conv2d,
  maxpool2d,
  relu,
  add,
  batchnorm2d,
  dropout,
  softmax_cross_entropy,
  sgd_update,
  adamw_update,
  reorder,
  reduce_sum,
  scale,
  sparse_matmul,  // CSR x dense (f32): make_sparse_matmul
  quantize,       // f32 <-> s8/u8 (the dtype is the 8-bit side): quantize / dequantize
  dequantize,
};
std::string_view op_name(Op op);

struct SgdParams {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;  // L2, added to the gradient (PyTorch SGD semantics)
  bool nesterov = false;
};

struct AdamWParams {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;  // decoupled (AdamW)
  int64_t step = 1;            // 1-based, for bias correction
};

struct BatchNormParams {
  double eps = 1e-5;
  double momentum = 0.1;  // running = (1 - momentum) * running + momentum * batch (PyTorch)
};

/// Result of a softmax cross-entropy over a batch.
struct LossResult {
  double loss_sum = 0;  // sum of per-sample losses
  int64_t correct = 0;  // argmax(logits) == label
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  /// Whether `op` runs on this backend for `dtype`; callers ask before placing an op. The dtype is
  /// the key of the implementation list: linear / conv2d at s8 or u8 (the src dtype) are the INT8
  /// kernels, maxpool2d / relu at s8 or u8 their integer forms, sparse_matmul at f32 the CSR kernel.
  virtual bool supports(Op op, DType dtype) const = 0;
  /// Whether linear/conv2d write their results (dst, diff_src) in `dtype` when handed such tensors,
  /// which mixed-precision activations need (Model::set_low_precision_activations); else f32 only.
  virtual bool writes_matmul_results_in(DType dtype) const { return dtype == DType::f32; }
  /// Human-readable description of the device (CPU model, GPU name).
  virtual std::string device_name() const = 0;
  /// The GPU's streaming multiprocessors (a MIG slice's own, fewer than its board's); 0 on a CPU.
  virtual int multiprocessors() const { return 0; }

  // ---- memory ----
  virtual Tensor empty(const Shape& shape, DType dtype, MemoryFormat format = MemoryFormat::contiguous);
  virtual Tensor zeros(const Shape& shape, DType dtype, MemoryFormat format = MemoryFormat::contiguous);
  virtual void fill_zero(Tensor& t) = 0;
  /// Copies between any two devices this backend can reach, converting layout (not dtype).
  void copy(const Tensor& src, Tensor& dst);
  /// Converts dtype and/or layout (f32 <-> bf16/f16, NCHW <-> NHWC).
  void reorder(const Tensor& src, Tensor& dst);
  /// dst (f32) = src (f32) with every element rounded to the nearest `precision` value (bf16 or f16;
  /// round to nearest even, f16 subnormals kept and overflow to inf, NaN stays NaN): what a tensor of
  /// that type would hold, kept in f32. Mixed-precision training uses it to emulate bf16/f16 compute
  /// where the device has none, and to round results to the low precision. src may be dst.
  /// The default converts through a `precision` tensor with two reorders.
  virtual void round_to_precision(const Tensor& src, Tensor& dst, DType precision);
  virtual void synchronize() {}
  /// The layout this backend prefers for conv activations it allocates.
  virtual MemoryFormat preferred_conv_format() const { return MemoryFormat::contiguous; }

  // ---- dense layers: each entry checks the contract (op_contract.h) once, then runs *_impl ----
  void linear_forward(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                      PostOp post = PostOp::none);
  void linear_backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src);
  /// diff_weights = diff_dst^T src; diff_bias = sum over N of diff_dst (if given).
  void linear_backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights, Tensor* diff_bias);

  void conv2d_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                      PostOp post = PostOp::none);
  void conv2d_backward_data(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src);
  void conv2d_backward_weights(const ConvParams& p, const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                               Tensor* diff_bias);

  // ---- pooling and every op below: each entry checks the contract once, then runs *_impl ----
  /// `workspace` is allocated by the backend on first use (its content is backend-specific, e.g.
  /// argmax indices) and handed back unchanged to maxpool2d_backward.
  void maxpool2d_forward(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace);
  void maxpool2d_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace, Tensor& diff_src);

  // ---- elementwise (src and dst may be the same tensor where it makes sense) ----
  void relu_forward(const Tensor& src, Tensor& dst);
  /// diff_src = diff_dst where dst > 0, else 0 (dst is the forward output).
  void relu_backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src);
  void add(const Tensor& a, const Tensor& b, Tensor& dst);
  /// dst += alpha * src
  void axpy(double alpha, const Tensor& src, Tensor& dst);
  void scale(Tensor& t, double alpha);

  // ---- normalisation and regularisation ----
  /// Training mode: uses batch statistics, writes save_mean/save_invstd [C] and updates running stats.
  void batchnorm_forward_training(const BatchNormParams& p, const Tensor& src, const Tensor& gamma, const Tensor& beta,
                                  Tensor& dst, Tensor& save_mean, Tensor& save_invstd, Tensor& running_mean,
                                  Tensor& running_var);
  void batchnorm_forward_inference(const BatchNormParams& p, const Tensor& src, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var, Tensor& dst);
  void batchnorm_backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_invstd, Tensor& diff_src, Tensor& diff_gamma, Tensor& diff_beta);
  /// Inverted dropout: keeps with probability 1-p and scales by 1/(1-p); mask (u8) is written.
  void dropout_forward(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask);
  void dropout_backward(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src);

  // ---- loss ----
  /// logits [N, C], labels s32 [N]. Writes diff_logits = grad_scale * (softmax - onehot) when given.
  LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* diff_logits, double grad_scale);

  // ---- optimizers (in place on param and state) ----
  void sgd_update(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf);
  void adamw_update(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v);

  // ---- reductions ----
  double sum(const Tensor& t);
  double sum_squares(const Tensor& t);

  // ---- compressed execution (compressed_ops.h); each entry checks the contract, then the
  // backend's *_impl. Unsupported (see supports()) throws ConfigError naming the backend. ----
  /// An s8/u8 linear (conv == nullptr) or conv2d of `layer`, prepared on this backend's device.
  std::unique_ptr<Int8Kernel> make_int8_kernel(const Int8LayerData& layer, const ConvParams* conv = nullptr);
  /// CSR matrix `a` prepared for C = post(bias + A B) on this device; `a` must outlive the kernel.
  std::unique_ptr<SparseMatmulKernel> make_sparse_matmul(const CsrMatrix& a, const SparseMatmulOptions& options = {});
  /// dst (s8/u8) = clamp(nearbyint(src / scale) + zero_point), elementwise in memory order (src and
  /// dst dense with one layout), per-tensor parameters: quantize_value() of quant_params.h.
  void quantize(const Tensor& src, const QuantParams& params, Tensor& dst);
  /// dst (f32) = (src - zero_point) * scale.
  void dequantize(const Tensor& src, const QuantParams& params, Tensor& dst);
  /// Max pooling on s8/u8 channels-last values (exact: pooling commutes with the quantizer).
  void int8_maxpool2d(const PoolParams& p, const Tensor& src, Tensor& dst);
  /// t = max(t, zero_point) on a dense s8/u8 tensor: ReLU on quantized values.
  void int8_relu(Tensor& t, int32_t zero_point);

 protected:
  virtual void copy_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void reorder_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void maxpool2d_forward_impl(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) = 0;
  virtual void maxpool2d_backward_impl(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                                       Tensor& diff_src) = 0;
  virtual void relu_forward_impl(const Tensor& src, Tensor& dst) = 0;
  virtual void relu_backward_impl(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) = 0;
  virtual void add_impl(const Tensor& a, const Tensor& b, Tensor& dst) = 0;
  virtual void axpy_impl(double alpha, const Tensor& src, Tensor& dst) = 0;
  virtual void scale_impl(Tensor& t, double alpha) = 0;
  virtual void batchnorm_forward_training_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                               const Tensor& beta, Tensor& dst, Tensor& save_mean, Tensor& save_invstd,
                                               Tensor& running_mean, Tensor& running_var) = 0;
  virtual void batchnorm_forward_inference_impl(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                                const Tensor& beta, const Tensor& running_mean,
                                                const Tensor& running_var, Tensor& dst) = 0;
  virtual void batchnorm_backward_impl(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma,
                                       const Tensor& save_mean, const Tensor& save_invstd, Tensor& diff_src,
                                       Tensor& diff_gamma, Tensor& diff_beta) = 0;
  virtual void dropout_forward_impl(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) = 0;
  virtual void dropout_backward_impl(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) = 0;
  virtual LossResult softmax_cross_entropy_impl(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                                double grad_scale) = 0;
  virtual void sgd_update_impl(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) = 0;
  virtual void adamw_update_impl(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) = 0;
  virtual double sum_impl(const Tensor& t) = 0;
  virtual double sum_squares_impl(const Tensor& t) = 0;
  virtual void linear_forward_impl(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                                   PostOp post) = 0;
  virtual void conv2d_forward_impl(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                                   Tensor& dst, PostOp post) = 0;
  virtual void linear_backward_data_impl(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) = 0;
  virtual void linear_backward_weights_impl(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                            Tensor* diff_bias) = 0;
  virtual void conv2d_backward_data_impl(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                         Tensor& diff_src) = 0;
  virtual void conv2d_backward_weights_impl(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                            Tensor& diff_weights, Tensor* diff_bias) = 0;
  // Defaults: host loops on a CPU device (the reference backend's), refused elsewhere.
  virtual std::unique_ptr<Int8Kernel> make_int8_kernel_impl(const Int8LayerData& layer, const ConvParams* conv);
  virtual std::unique_ptr<SparseMatmulKernel> make_sparse_matmul_impl(const CsrMatrix& a,
                                                                      const SparseMatmulOptions& options);
  virtual void quantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst);
  virtual void dequantize_impl(const Tensor& src, const QuantParams& params, Tensor& dst);
  virtual void int8_maxpool2d_impl(const PoolParams& p, const Tensor& src, Tensor& dst);
  virtual void int8_relu_impl(Tensor& t, int32_t zero_point);

 private:
  /// Throws ConfigError naming the backend when supports(op, dtype) is false.
  void require(Op op, DType dtype, const char* what) const;
};

/// Makes a backend: one of registered_backends(), or "auto" (the first registered accelerator with
/// a device, else "cpu"). Throws ConfigError naming the reason when unavailable.
std::unique_ptr<Backend> make_backend(const std::string& name, int device_index = 0);

/// How a backend is made, and how many devices of its kind this machine has now.
using BackendFactory = std::unique_ptr<Backend> (*)(int device_index);
using DeviceCount = int (*)();
/// Registers (or replaces) a backend by name. "reference" and "cpu" are built in (one device each);
/// an accelerator library registers itself at start-up (lathe::cuda::register_backend() in app/ and
/// the test main), so the engine never links it. Thread-safe; call before make_backend.
void register_backend(const std::string& name, BackendFactory factory, DeviceCount device_count);
/// The names make_backend accepts (besides "auto"), in registration order.
std::vector<std::string> registered_backends();
/// Devices of the registered backend `name` usable now (0 when it is not registered).
int backend_device_count(const std::string& name);
/// backend_device_count("cuda").
int cuda_device_count();

}  // namespace lathe
