// Model: a graph of named nodes. Each node runs one Layer on the outputs of earlier nodes (or the
// model input), so any intermediate activation can be read back by name after a forward pass
// (distillation and quantization calibration tap them). Parameter names follow PyTorch's
// state_dict of the equivalent nn.Sequential: "<node name>.weight".
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/nn/layer.h"

namespace lathe {

struct NamedParam {
  std::string name;  // "0.weight"
  Param* param;
};

struct NamedBuffer {
  std::string name;  // "1.running_mean"
  Buffer* buffer;
};

/// Per-layer accounting for summaries and the model/* metrics.
struct LayerInfo {
  std::string name, description;
  Shape output_shape;  // per sample (batch 1)
  int64_t params = 0, param_bytes = 0, flops = 0;
};

class Model {
 public:
  static constexpr int kModelInput = -1;

  /// `input_shape` excludes the batch dimension: {1, 28, 28} for images, {784} for flat vectors
  /// (an image batch is viewed as [N, 784] for such a model, like x.view(N, -1) in PyTorch).
  explicit Model(Shape input_shape);

  /// Adds a node. `inputs` are names of earlier nodes; empty means the previous node (or the
  /// model input for the first). Returns the node's index.
  int add(const std::string& name, std::unique_ptr<Layer> layer, std::vector<std::string> inputs = {});

  /// Fuses each ReLU into the Linear/Conv2d before it when that layer feeds nothing else (on by
  /// default): the ReLU's output then is the layer's output, written once. The fused layer's own
  /// pre-activation output no longer exists, so activation() refuses it and names the ReLU node.
  /// Also folds the backward of a ReLU whose one consumer can apply its mask (max pooling, see
  /// Layer::can_mask_input_relu) into that consumer, when the ReLU's input feeds nothing else: the
  /// ReLU's backward pass is skipped (same numbers). Call before create_params().
  void set_fuse_relu(bool on) { m_fuse_relu = on; }
  /// True when node i is a ReLU whose backward its consumer applies (set_fuse_relu).
  bool relu_backward_folded(size_t i) const { return i < m_relu_folded.size() && m_relu_folded[i]; }

  /// Mixed-precision training: every Linear/Conv2d computes at `precision` (f32, bf16 or f16) with
  /// the f32 parameters as master weights (see matmul_precision.h). Any time; f32 by default.
  void set_compute_precision(DType precision);
  DType compute_precision() const { return m_compute_precision; }

  /// Under a native low compute precision (bf16 on a CPU with bf16 instructions), activations and
  /// their gradients are stored at that precision wherever every layer touching them runs natively
  /// there (Linear/Conv2d -> ReLU -> max pooling -> Flatten chains), as PyTorch autocast stores a bf16
  /// conv's output: half the memory traffic, no conversion passes. The numbers are the same as with
  /// f32 storage, since the matmul layers round their results to the low precision anyway. The
  /// model's output (the logits) stays f32. On by default; activation() refuses a node stored low,
  /// so code that reads intermediate activations (calibration, feature distillation) turns it off.
  void set_low_precision_activations(bool on) { m_low_precision_activations = on; }
  bool low_precision_activations() const { return m_low_precision_activations; }
  /// The dtype node i's output had in the last forward pass.
  DType activation_dtype(size_t i) const { return m_outputs.at(i).dtype(); }

  /// Creates and initialises every parameter on `backend` in `dtype` (PyTorch's default init, from `rng`).
  void create_params(Backend& backend, DType dtype, Rng& rng);

  /// Runs every node; returns the last node's output. `input` is [N, ...] matching input_shape.
  const Tensor& forward(LayerContext& ctx, const Tensor& input);
  /// Back-propagates `diff_output` (gradient of the loss w.r.t. the last output); overwrites every
  /// parameter gradient. The input gets no gradient.
  void backward(LayerContext& ctx, const Tensor& diff_output);
  /// Like backward(), plus gradients entering at intermediate nodes (feature distillation): each
  /// {node index from find(), gradient shaped and laid out like that node's output} is added to the
  /// gradient flowing back into that node.
  void backward(LayerContext& ctx, const Tensor& diff_output, const std::vector<std::pair<int, const Tensor*>>& extra);
  /// Data-parallel overlap: backward() calls `hook` with each parameter as soon as its gradient is
  /// final (reverse layer order), so a communicator can start sending it. Empty (the default) = none.
  void set_grad_ready_hook(std::function<void(const Param*)> hook) { m_grad_ready = std::move(hook); }

  /// Output of a node from the last forward pass (any node, by name), in the model's dtype: throws
  /// for a node stored at the low precision (see set_low_precision_activations).
  const Tensor& activation(const std::string& name) const;
  const Tensor& output() const { return m_outputs.back(); }

  std::vector<NamedParam> named_params();
  std::vector<NamedBuffer> named_buffers();
  int64_t param_count() const;
  int64_t param_bytes() const;
  /// Forward FLOPs for one sample (2 x multiply-adds of linear and conv layers).
  int64_t flops_per_sample() const;
  std::vector<LayerInfo> layer_infos() const;
  std::string summary() const;

  const Shape& input_shape() const { return m_input_shape; }
  size_t size() const { return m_nodes.size(); }
  Layer& layer(size_t i) { return *m_nodes.at(i).layer; }
  const std::string& node_name(size_t i) const { return m_nodes.at(i).name; }
  /// Puts `layer` in place of node i's layer after create_params() (its output shape must match),
  /// carrying over a fused ReLU; returns the old layer. Sparse deployment swaps executors in and out.
  std::unique_ptr<Layer> replace_layer(size_t i, std::unique_ptr<Layer> layer);
  int find(const std::string& name) const;
  /// Indices of a node's inputs (kModelInput for the model input), in order.
  const std::vector<int>& node_inputs(size_t i) const { return m_nodes.at(i).inputs; }
  bool fuse_relu() const { return m_fuse_relu; }
  DType dtype() const { return m_dtype; }

 private:
  std::function<void(const Param*)> m_grad_ready;
  struct Node {
    std::string name;
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;
    Shape sample_shape;  // output shape at batch 1
  };

  Shape batch_shape(int node, int64_t batch) const;
  const Tensor& input_of(int index, const Tensor& model_input) const;
  /// Fills m_act_dtype for this backend: which node outputs are stored at the compute precision.
  void plan_activation_dtypes(const Backend& backend);
  /// Per node, the nodes that read its output (in node order).
  std::vector<std::vector<int>> consumers() const;

  Shape m_input_shape;
  std::vector<Node> m_nodes;
  std::map<std::string, int> m_index;
  std::vector<Tensor> m_outputs, m_diffs, m_temps;
  std::vector<char> m_diff_ready;
  std::vector<int> m_fused_relu_of;  // per node: the ReLU node fused into it, or -1
  std::vector<char> m_relu_folded;   // per node: a ReLU whose backward its one consumer applies
  std::vector<DType> m_act_dtype;    // per node: the dtype its output is stored in (this forward)
  bool m_low_precision_activations = true;
  bool m_fuse_relu = true;
  Tensor m_input_view;
  DType m_dtype = DType::f32;
  DType m_compute_precision = DType::f32;
  bool m_created = false;
};

}  // namespace lathe
