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
};
std::string_view op_name(Op op);

enum class PostOp : uint8_t { none, relu };

struct ConvParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
};

struct PoolParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;
};

int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad);

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
  /// Whether `op` runs on this backend for `dtype`; callers ask before placing an op.
  virtual bool supports(Op op, DType dtype) const = 0;
  /// Whether linear/conv2d write their results (dst, diff_src) in `dtype` when handed such tensors,
  /// which mixed-precision activations need (Model::set_low_precision_activations); else f32 only.
  virtual bool writes_matmul_results_in(DType dtype) const { return dtype == DType::f32; }
  /// Human-readable description of the device (CPU model, GPU name).
  virtual std::string device_name() const = 0;

  // ---- memory ----
  virtual Tensor empty(const Shape& shape, DType dtype, MemoryFormat format = MemoryFormat::contiguous);
  virtual Tensor zeros(const Shape& shape, DType dtype, MemoryFormat format = MemoryFormat::contiguous);
  virtual void fill_zero(Tensor& t) = 0;
  /// Copies between any two devices this backend can reach, converting layout (not dtype).
  virtual void copy(const Tensor& src, Tensor& dst) = 0;
  /// Converts dtype and/or layout (f32 <-> bf16/f16, NCHW <-> NHWC).
  virtual void reorder(const Tensor& src, Tensor& dst) = 0;
  /// dst (f32) = src (f32) with every element rounded to the nearest `precision` value (bf16 or f16;
  /// round to nearest even, f16 subnormals kept and overflow to inf, NaN stays NaN): what a tensor of
  /// that type would hold, kept in f32. Mixed-precision training uses it to emulate bf16/f16 compute
  /// where the device has none, and to round results to the low precision. src may be dst.
  /// The default converts through a `precision` tensor with two reorders.
  virtual void round_to_precision(const Tensor& src, Tensor& dst, DType precision);
  virtual void synchronize() {}
  /// The layout this backend prefers for conv activations it allocates.
  virtual MemoryFormat preferred_conv_format() const { return MemoryFormat::contiguous; }

  // ---- dense layers ----
  virtual void linear_forward(const Tensor& src, const Tensor& weights, const Tensor* bias, Tensor& dst,
                              PostOp post = PostOp::none) = 0;
  virtual void linear_backward_data(const Tensor& diff_dst, const Tensor& weights, Tensor& diff_src) = 0;
  /// diff_weights = diff_dst^T src; diff_bias = sum over N of diff_dst (if given).
  virtual void linear_backward_weights(const Tensor& src, const Tensor& diff_dst, Tensor& diff_weights,
                                       Tensor* diff_bias) = 0;

  virtual void conv2d_forward(const ConvParams& p, const Tensor& src, const Tensor& weights, const Tensor* bias,
                              Tensor& dst, PostOp post = PostOp::none) = 0;
  virtual void conv2d_backward_data(const ConvParams& p, const Tensor& diff_dst, const Tensor& weights,
                                    Tensor& diff_src) = 0;
  virtual void conv2d_backward_weights(const ConvParams& p, const Tensor& src, const Tensor& diff_dst,
                                       Tensor& diff_weights, Tensor* diff_bias) = 0;

  /// `workspace` is allocated by the backend on first use (its content is backend-specific, e.g.
  /// argmax indices) and handed back unchanged to maxpool2d_backward.
  virtual void maxpool2d_forward(const PoolParams& p, const Tensor& src, Tensor& dst, Tensor& workspace) = 0;
  virtual void maxpool2d_backward(const PoolParams& p, const Tensor& diff_dst, const Tensor& workspace,
                                  Tensor& diff_src) = 0;

  // ---- elementwise (src and dst may be the same tensor where it makes sense) ----
  virtual void relu_forward(const Tensor& src, Tensor& dst) = 0;
  /// diff_src = diff_dst where dst > 0, else 0 (dst is the forward output).
  virtual void relu_backward(const Tensor& dst, const Tensor& diff_dst, Tensor& diff_src) = 0;
  virtual void add(const Tensor& a, const Tensor& b, Tensor& dst) = 0;
  /// dst += alpha * src
  virtual void axpy(double alpha, const Tensor& src, Tensor& dst) = 0;
  virtual void scale(Tensor& t, double alpha) = 0;

  // ---- normalisation and regularisation ----
  /// Training mode: uses batch statistics, writes save_mean/save_invstd [C] and updates running stats.
  virtual void batchnorm_forward_training(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                          const Tensor& beta, Tensor& dst, Tensor& save_mean, Tensor& save_invstd,
                                          Tensor& running_mean, Tensor& running_var) = 0;
  virtual void batchnorm_forward_inference(const BatchNormParams& p, const Tensor& src, const Tensor& gamma,
                                           const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                           Tensor& dst) = 0;
  virtual void batchnorm_backward(const Tensor& src, const Tensor& diff_dst, const Tensor& gamma,
                                  const Tensor& save_mean, const Tensor& save_invstd, Tensor& diff_src,
                                  Tensor& diff_gamma, Tensor& diff_beta) = 0;
  /// Inverted dropout: keeps with probability 1-p and scales by 1/(1-p); mask (u8) is written.
  virtual void dropout_forward(double p, uint64_t seed, const Tensor& src, Tensor& dst, Tensor& mask) = 0;
  virtual void dropout_backward(double p, const Tensor& diff_dst, const Tensor& mask, Tensor& diff_src) = 0;

  // ---- loss ----
  /// logits [N, C], labels s32 [N]. Writes diff_logits = grad_scale * (softmax - onehot) when given.
  virtual LossResult softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* diff_logits,
                                           double grad_scale) = 0;

  // ---- optimizers (in place on param and state) ----
  virtual void sgd_update(const SgdParams& p, Tensor& param, const Tensor& grad, Tensor& momentum_buf) = 0;
  virtual void adamw_update(const AdamWParams& p, Tensor& param, const Tensor& grad, Tensor& m, Tensor& v) = 0;

  // ---- reductions ----
  virtual double sum(const Tensor& t) = 0;
  virtual double sum_squares(const Tensor& t) = 0;
};

/// Makes a backend by name: "reference", "cpu" (oneDNN) or "cuda" (when built and a device exists).
/// "auto" picks cuda when a device is present, else cpu. Throws naming the reason when unavailable.
std::unique_ptr<Backend> make_backend(const std::string& name, int device_index = 0);

/// Registered by the CUDA backend library when linked (see app/).
using BackendFactory = std::unique_ptr<Backend> (*)(int device_index);
void register_cuda_backend(BackendFactory factory, int (*device_count)());
/// Number of CUDA devices usable now (0 without the backend, a driver or a device).
int cuda_device_count();

}  // namespace lathe
