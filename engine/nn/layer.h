// Layer: one node's computation. The Model owns the output and gradient tensors and hands them in,
// so activations are allocated once per shape and reused every step (no allocation in the loop).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/rng.h"
#include "engine/nn/operand_transform.h"

namespace lathe {

/// A learnable tensor and its gradient (same shape, dtype and device).
struct Param {
  std::string name;  // local name: "weight", "bias"
  Tensor value;
  Tensor grad;
};

/// A non-learned tensor that is part of the model's state (BatchNorm running statistics).
struct Buffer {
  std::string name;
  Tensor value;
};

struct LayerContext {
  Backend& backend;
  bool training = true;
  uint64_t step = 0;  // for per-step randomness (dropout)
};

class Layer {
 public:
  virtual ~Layer() = default;

  /// Lower-case kind, as in the JSON layer list: "linear", "conv2d", ...
  virtual std::string kind() const = 0;
  /// One line for summaries: "linear(784 -> 512)".
  virtual std::string describe() const { return kind(); }
  virtual int num_inputs() const { return 1; }

  /// Output shape (batch dimension included) for these input shapes; throws on a mismatch.
  virtual Shape output_shape(const std::vector<Shape>& inputs) const = 0;
  /// Layout of the output this layer wants (conv layers ask the backend; most keep their input's).
  virtual MemoryFormat output_format(const Backend& backend, const std::vector<const Tensor*>& src) const {
    return src.empty() ? MemoryFormat::contiguous : src[0]->format();
  }

  /// A new layer of the same kind and configuration, parameters not created yet (a model copied to
  /// another device, a model rebuilt around it); null for layers that are not copied this way
  /// (deployed executors such as the sparse ones).
  virtual std::unique_ptr<Layer> fresh_copy() const { return nullptr; }

  /// Creates parameters in `dtype` on the backend's device and initialises them (PyTorch defaults).
  virtual void create_params(Backend& backend, DType dtype, Rng& rng) {}

  virtual void forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) = 0;
  /// Writes the gradient for each input into diff_src[i] (skipped where null) and overwrites the
  /// parameter gradients.
  virtual void backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst,
                        const Tensor& diff_dst, const std::vector<Tensor*>& diff_src) = 0;

  virtual std::vector<Param*> params() { return {}; }
  virtual std::vector<Buffer*> buffers() { return {}; }
  /// Forward FLOPs per sample, counted as 2 x multiply-adds of matmuls and convolutions (elementwise
  /// work is not counted, as in the usual MFU convention).
  virtual int64_t flops_per_sample(const std::vector<Shape>& inputs) const { return 0; }

  /// Layers that can apply a ReLU to their own output as they write it (a oneDNN post-op) say so;
  /// the Model then skips the separate ReLU pass (see Model::set_fuse_relu).
  virtual bool can_fuse_relu() const { return false; }
  virtual void set_fused_relu(bool) {}

  /// Layers whose backward can apply the gradient mask of the ReLU that feeds them (max pooling: the
  /// ReLU's output at a window's maximum is the pooling's output) say so; the Model then skips that
  /// ReLU's backward pass, a full-size read-read-write, and the layer's input gradient is the
  /// gradient before the ReLU (see Model::set_fuse_relu).
  virtual bool can_mask_input_relu() const { return false; }
  virtual void set_input_relu(bool) {}

  /// Mixed-precision training: layers with matmuls (Linear, Conv2d) compute them at `precision`
  /// (f32, bf16 or f16) with f32 parameters (see matmul_precision.h); the others stay f32.
  virtual void set_compute_precision(DType precision) {}

  /// Mixed-precision activations (Model::set_low_precision_activations): what this layer does with
  /// activations stored at the low compute precision `precision` on `backend`.
  ///   converts:       reads its input and writes its output in f32 or `precision`, as the Model
  ///                   hands them (Linear/Conv2d computing natively at `precision`);
  ///   passes_through: its output has its input's dtype, f32 or `precision` (ReLU, max pooling,
  ///                   Flatten, where the backend runs them at `precision`);
  ///   none:           f32 in, f32 out (every other layer).
  enum class LowPrecisionIo { none, converts, passes_through };
  virtual LowPrecisionIo low_precision_io(const Backend& backend, DType precision) const {
    return LowPrecisionIo::none;
  }

  /// Quantization-aware training: layers with matmuls (Linear, Conv2d) pass their input and weights
  /// through `t` in forward and its straight-through estimator in backward (null removes it).
  /// Returns false for layers that have no matmul operands to transform.
  virtual bool set_operand_transform(std::shared_ptr<OperandTransform> t) { return false; }
};

/// Fills `t` (any device) with U(-bound, bound) drawn on the host from `rng`.
void init_uniform(Backend& backend, Tensor& t, double bound, Rng& rng);
/// Creates a parameter tensor on the backend and its zeroed gradient.
Param make_param(Backend& backend, const std::string& name, const Shape& shape, DType dtype);

}  // namespace lathe
