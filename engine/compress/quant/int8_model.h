// Int8Model: real INT8 inference for a trained Model (mlp, cnn, custom layer lists, and graphs with
// BatchNorm and residual Add such as an ONNX-imported ResNet: see "Graphs" below). Each Linear/Conv2d (with the ReLU
// after it fused) runs as s8 weights x u8/s8 activations -> s32 -> requantized output on the backend's INT8 kernel
// (Backend::make_int8_kernel: oneDNN on cpu, cuBLASLt on cuda, loops on reference); activations stay quantized between
// consecutive INT8 layers, through max-pooling (on the integers), ReLU, dropout (identity at inference) and flatten;
// the last layer writes f32 logits.
//
// Plan, per node in order (the model must be a chain: each node reads the one before):
//   f32 input  --quantize(ranges["input"])-->  u8 (asymmetric)  --int8 conv+ReLU-->  u8 (ranges of
//   the ReLU node)  --int8 maxpool-->  u8  --flatten-->  u8 [N, H*W*C]  --int8 linear-->  ... f32.
// Flatten of channels-last data keeps its (H, W, C) order and the next Linear's weight columns are
// permuted to match (no reorder at run time; the same products, so the same integers).
// Layers named in keep_f32 run their f32 Layer on dequantized input (mixed precision); their output
// is quantized again, with the range of the node that produced it, where the next INT8 layer starts.
// Activation parameters are per tensor, keyed by the name of the node whose output they quantize
// (kInputTap for the model input); a value is requantized only at an INT8 layer's output or when it
// enters INT8 from f32, so max-pool/flatten/dropout outputs reuse their producer's parameters.
//
// Graphs (a node reading anything but the node before it, or a batchnorm2d anywhere) are planned
// node by node over value slots (int8_graph_plan.cpp), each node's value kept quantized, f32 or
// both (a dequantize made once, on demand):
//   - conv2d whose only reader is a batchnorm2d: the BatchNorm is folded into its weights in f32
//     before quantization (int8_graph.h); the INT8 conv's output is the BatchNorm node's value;
//   - a ReLU that is the only reader of an INT8 layer (or of its folded BatchNorm) is fused into it;
//   - every other batchnorm2d (after an Add, or after a conv that also feeds a residual branch, as
//     in a pre-activation block) runs as an f32 step on the dequantized value, and the value is
//     quantized again with its own calibrated range where INT8 resumes;
//   - add: dequantize-add-quantize, q = sat(round((s_a (q_a - z_a) + s_b (q_b - z_b)) / s_y) + z_y)
//     with the Add node's calibrated output parameters, one f32 pass on the host. Chosen over
//     requantizing both inputs to s_y and adding integers because that rounds twice (each input,
//     then nothing) where this rounds once, exactly as the fake-quantized f32 reference (and an
//     ONNX QDQ graph: DequantizeLinear x2 -> Add -> QuantizeLinear) does, at the same cost; an
//     Add that is the model's output stays f32;
//   - relu on a quantized value clamps at the zero point (in place only when it is the value's only
//     reader), max pooling runs on the integers, flatten before an INT8 linear is the (H, W, C) view.
// Every INT8 layer's output is quantized (with its output node's range) except the model's output.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/compress/quant/int8_layer.h"
#include "engine/nn/model.h"

namespace lathe {

/// The activation-parameter key of the model input.
inline const std::string kInputTap = "input";

/// Per-tensor activation parameters by node name (and kInputTap).
using ActivationParams = std::map<std::string, QuantParams>;

struct Int8ModelOptions {
  bool per_channel_weights = true;
  Int8WeightRange weight_range = Int8WeightRange::auto_for_cpu;
  std::set<std::string> keep_f32;  ///< Linear/Conv2d node names that stay f32
  /// Dynamic quantization (quant.mode ptq-dynamic): no calibrated ranges; each INT8 layer's input is
  /// quantized with a symmetric range taken from the batch itself (max |x|: u8 after a ReLU, else
  /// s8), its output is f32 (s_x s_w[o] acc + b, then the ReLU), and everything between INT8 layers
  /// runs in f32. `acts` may be empty.
  bool dynamic_activations = false;
};

/// The node outputs whose ranges an Int8Model may need: kInputTap, then every node of the chain
/// except the last and except Linear/Conv2d nodes whose ReLU is fused into them (their output is the
/// ReLU node's). Throws ConfigError for a model the executor does not cover (see the header).
std::vector<std::string> int8_activation_taps(const Model& model);

/// One INT8 layer as planned: the parameters its input is quantized with and how its weights are
/// (what quantization-aware training fake-quantizes to match the executor).
struct Int8LayerQuantization {
  std::string node;  ///< the Linear/Conv2d node
  QuantParams input;
  int weight_bits = 8;
  bool per_channel_weights = true;
};

class Int8Model {
 public:
  /// Quantizes `model`'s weights and plans the execution. `model` must outlive this object (its
  /// f32 layers run the keep_f32 nodes). Parameters on a device are copied to the host through
  /// `be`, quantized there, and each INT8 layer is prepared on `be` (make_int8_kernel); forward()
  /// runs every step through `be`'s ops. refusal() says whether `be` covers the plan. Every tap the
  /// plan uses must be in `acts` (8-bit, per tensor); a missing one throws lathe::Error.
  Int8Model(Model& model, Backend& be, const ActivationParams& acts, const Int8ModelOptions& options = {});
  ~Int8Model();
  Int8Model(Int8Model&&) noexcept;

  /// images: f32 [N, ...model input shape...] on the host or the backend's device (uploaded; an
  /// image batch for a flat model is viewed as [N, features]); returns f32 logits [N, classes] on
  /// the backend's device. Throws ConfigError with refusal()'s reason on a backend that lacks a step.
  Tensor forward(const Tensor& images);

  /// Why the plan's backend cannot run it ("" when it can): a dynamic plan off the CPU (per-batch
  /// max |x| and the rescale run on the host), or a step whose op the backend does not support
  /// (named: dequantize / f32 layers between INT8 layers are CPU-only).
  std::string refusal() const;
  /// What runs the INT8 layers ("oneDNN int8 (cpu)", "cuBLASLt int8 GEMM (cuda)"), for events.
  std::string kernels() const;

  /// The tensors a saved INT8 model holds: per INT8 layer `<node>.weight` (s8, as the kernel reads
  /// it), `<node>.weight_scale` (f32 [O]), `<node>.bias` (f32), `<node>.input_scale` /
  /// `.input_zero_point` and, when its output is quantized, `.output_scale` / `.output_zero_point`;
  /// per f32 layer its f32 parameters.
  std::vector<std::pair<std::string, Tensor>> state_tensors() const;
  /// Writes state_tensors() as safetensors (metadata: format, plan, weight bits); returns the file size.
  int64_t save(const std::string& path, const std::map<std::string, std::string>& metadata = {}) const;
  /// The exact size save() writes (saves to a temporary file and removes it).
  int64_t serialized_bytes() const;

  /// The INT8 layers in execution order.
  std::vector<Int8LayerQuantization> layer_quantization() const;

  /// One line per step of the plan ("quantize input u8", "int8 conv2d 0+1 u8 -> u8", ...).
  std::string plan() const;
  int int8_layers() const;
  int f32_layers() const;
  /// The weight bits the INT8 layers use (7 on CPUs without VNNI, see int8_cpu.h).
  int weight_bits() const;

  /// Per-step wall time accumulated by forward() while profiling is on (for bench/int8_cnn).
  void set_profiling(bool on) { m_profiling = on; }
  /// (step text, seconds) per step since profiling was switched on.
  std::vector<std::pair<std::string, double>> profile() const;

  /// One step of the plan (read-only through steps(), for tests and tools).
  struct Step {
    enum class Kind {
      quantize,
      dequantize,
      int8_conv,
      int8_linear,
      int8_maxpool,
      int8_relu,
      flatten_q,
      f32_layer,
      f32_relu,
      dynamic_quantize,  // quantize with a symmetric range from the batch (params: dtype, bits)
      dynamic_rescale,   // f32 y = s_x y + bias, then ReLU when `relu`
      int8_add           // graphs: dequantize-add-quantize of two quantized values (params_a, params_b -> params)
    };
    Kind kind;
    std::string node;  // node name (the group's first node for INT8 layers)
    std::string out_node;
    size_t index = 0;                    // node index (f32 layers)
    QuantParams params;                  // quantize: the target; dequantize / int8_relu: the current parameters
    bool to_channels_last = false;       // quantize: make the f32 input channels-last first (conv consumer)
    std::unique_ptr<Int8Kernel> kernel;  // int8_conv / int8_linear, prepared on the plan's backend
    Tensor bias;                         // f32 bias of an INT8 layer, for saving
    PoolParams pool;
    bool pool_fused = false;  // int8_maxpool: the conv step before pools inside its kernel; this passes on
    bool relu = false;        // dynamic_rescale
    std::string text;
    double seconds = 0;  // accumulated while profiling
    // Graph plans only (a chain plan leaves them empty / -1: each step reads the one before).
    std::vector<int> in_slots;       // the value slots the step reads
    int out_slot = -1;               // the slot its output is kept in
    QuantParams params_a, params_b;  // int8_add: its inputs' parameters
    std::string folded_bn;           // int8_conv: the batchnorm2d node folded into its weights
    Shape hwc_of;                    // int8_linear after flatten_q: the [C, H, W] its columns were permuted from
  };

  /// The plan in execution order (see the header comment).
  const std::vector<std::unique_ptr<Step>>& steps() const { return m_steps; }
  /// True for a dynamic-activation plan (Int8ModelOptions::dynamic_activations).
  bool dynamic() const { return m_dynamic; }
  /// The f32 model the plan was made from (its f32 layers run the f32 steps).
  const Model& model() const { return m_model; }

 private:
  /// The plan of dynamic_activations (see Int8ModelOptions).
  void plan_dynamic(const Int8ModelOptions& options);
  // The graph plan over value slots (int8_graph_plan.cpp; see "Graphs" in the header comment).
  struct GraphPlanner;
  void plan_graph(const ActivationParams& acts, const Int8ModelOptions& options);
  /// Runs a graph plan's steps over value slots (forward()'s body for graphs).
  Tensor forward_graph(Tensor x, LayerContext& ctx);
  /// The add step of a graph plan: a, b quantized alike (same shape and layout), dst a new tensor.
  Tensor int8_add(const Step& s, const Tensor& a, const Tensor& b);
  // The static plan, node by node (the constructor's seams).
  struct Planner;
  void plan_static(const ActivationParams& acts, const Int8ModelOptions& options);
  /// Hands each pooling that directly follows an int8 conv to the conv's kernel where the backend's
  /// kernel can pool (Int8Kernel::fuse_maxpool); the steps stay in the plan, for tools that read it.
  void fuse_poolings();
  /// Quantizes a Linear/Conv2d's host weights into Int8LayerData and prepares it on m_be.
  Step& add_int8_layer(Step::Kind kind, size_t node, const Int8LayerConfig& cfg, bool hwc_flat, const Shape& hwc_of);
  /// The same with the host f32 weights and bias given (a BatchNorm folded into them, or permuted).
  Step& add_int8_layer(Step::Kind kind, size_t node, const Int8LayerConfig& cfg, Tensor w, Tensor b);
  Step& add_step(Step::Kind kind, std::string node, std::string text);
  /// Runs one step on x (forward()'s body).
  Tensor run_step(Step& s, Tensor x, LayerContext& ctx);
  Tensor dynamic_quantize(const Step& s, const Tensor& x);
  void dynamic_rescale(const Step& s, Tensor& x) const;

  Model& m_model;
  Backend& m_be;
  std::vector<std::unique_ptr<Step>> m_steps;
  bool m_dynamic = false;
  float m_batch_scale = 1;  // dynamic: the scale the last dynamic quantize step chose
  bool m_profiling = false;
  int m_slots = 0;         // graph plans: the number of value slots (slot 0 is the model input)
  int m_result_slot = -1;  // graph plans: the slot of the f32 logits; -1 for a chain plan
};

}  // namespace lathe
