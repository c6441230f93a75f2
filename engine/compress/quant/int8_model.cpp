// Int8Model: planning (which nodes run INT8, where values are quantized) and execution.
#include "engine/compress/quant/int8_model.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "engine/compress/quant/int8_graph.h"
#include "engine/compress/quant/int8_plan_util.h"
#include "engine/core/timing.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/linear.h"
#include "engine/nn/maxpool2d.h"
#include "engine/nn/safetensors.h"

namespace lathe {

namespace {

using Kind = Int8Model::Step::Kind;

bool is_passthrough(const std::string& kind) {
  return kind == "maxpool2d" || kind == "flatten" || kind == "dropout" || kind == "relu";
}

/// Graphs (int8_graph_plan.cpp) are planned over value slots; chains of the original layer kinds
/// keep the sequential plan.
bool needs_graph_plan(Model& model) {
  if (!is_chain(model))
    return true;
  for (size_t i = 0; i < model.size(); ++i)
    if (model.layer(i).kind() == "batchnorm2d" || model.layer(i).kind() == "add")
      return true;
  return false;
}

/// Checks every node is a layer kind the executor covers.
void check_supported(const Model& model) {
  LATHE_CHECK(model.size() > 0, "INT8 model: empty model");
  for (size_t i = 0; i < model.size(); ++i) {
    const std::string kind = const_cast<Model&>(model).layer(i).kind();
    if (!is_int8_compute_kind(kind) && !is_passthrough(kind) && kind != "batchnorm2d" && kind != "add")
      throw ConfigError("quant: node '" + model.node_name(i) + "' is a " + kind +
                        ", which the INT8 executor does not cover (allowed: conv2d, linear, relu, maxpool2d, flatten, "
                        "dropout, batchnorm2d, add)");
  }
}

bool relu_follows(Model& model, size_t i) { return i + 1 < model.size() && model.layer(i + 1).kind() == "relu"; }

/// True when node i's ReLU was fused into it by the Model (its own output then is the ReLU's).
bool fused_by_model(Model& model, size_t i) {
  return model.fuse_relu() && relu_follows(model, i) && model.layer(i).can_fuse_relu();
}

/// The first Linear/Conv2d after node `after`, or -1.
int next_compute(Model& model, size_t after) {
  for (size_t j = after + 1; j < model.size(); ++j)
    if (is_int8_compute_kind(model.layer(j).kind()))
      return static_cast<int>(j);
  return -1;
}

const QuantParams& need(const ActivationParams& acts, const std::string& key) {
  const auto it = acts.find(key);
  LATHE_CHECK(it != acts.end(), "INT8 model: no activation parameters for '", key, "'");
  LATHE_CHECK(!it->second.per_channel() && it->second.bits == 8, "INT8 model: activation parameters of '", key,
              "' must be 8-bit per tensor, got ", it->second.describe());
  return it->second;
}


Tensor scalar_f32(float v) {
  Tensor t = Tensor::empty({1}, DType::f32);
  t.data<float>()[0] = v;
  return t;
}
Tensor scalar_s32(int32_t v) {
  Tensor t = Tensor::empty({1}, DType::s32);
  t.data<int32_t>()[0] = v;
  return t;
}

}  // namespace

std::vector<std::string> int8_activation_taps(const Model& model_in) {
  Model& model = const_cast<Model&>(model_in);
  check_supported(model);
  std::vector<std::string> taps{kInputTap};
  if (needs_graph_plan(model)) {  // any node's value may be quantized, except what the Model fuses away
    const std::vector<std::vector<int>> consumers = node_consumers(model);
    for (size_t i = 0; i + 1 < model.size(); ++i)
      if (relu_fused_by_model(model, consumers, i) < 0)
        taps.push_back(model.node_name(i));
    return taps;
  }
  for (size_t i = 0; i + 1 < model.size(); ++i)
    if (!(is_int8_compute_kind(model.layer(i).kind()) && fused_by_model(model, i)))
      taps.push_back(model.node_name(i));
  return taps;
}

Int8Model::~Int8Model() = default;
Int8Model::Int8Model(Int8Model&&) noexcept = default;

Int8Model::Int8Model(Model& model, Backend& be, const ActivationParams& acts, const Int8ModelOptions& options)
    : m_model(model), m_be(be) {
  check_supported(model);
  for (const std::string& name : options.keep_f32) {
    const int i = model.find(name);
    if (i < 0 || !is_int8_compute_kind(model.layer(i).kind()))
      throw ConfigError("quant: keep-f32 layer '" + name + "' is not a linear or conv2d node of the model");
  }
  if (needs_graph_plan(model)) {
    if (options.dynamic_activations)
      throw ConfigError(
          "quant.mode ptq-dynamic: the dynamic plan covers sequential models without batchnorm2d or add; this model "
          "has them (use ptq-static)");
    plan_graph(acts, options);
  } else if (options.dynamic_activations) {
    plan_dynamic(options);
  } else {
    plan_static(acts, options);
  }
  fuse_poolings();
}

void Int8Model::fuse_poolings() {
  for (size_t i = 0; i + 1 < m_steps.size(); ++i) {
    Step& conv = *m_steps[i];
    Step& pool = *m_steps[i + 1];
    // chain plans only: in a graph plan (slots) another node may read the conv's full-size output
    if (conv.kind != Kind::int8_conv || pool.kind != Kind::int8_maxpool || conv.out_slot >= 0 ||
        !pool.in_slots.empty() || !conv.kernel->fuse_maxpool(pool.pool))
      continue;
    pool.pool_fused = true;
    conv.text += " + max pooling fused in (" + conv.kernel->implementation() + ")";
    pool.text += " (fused into the conv above)";
  }
}

Int8Model::Step& Int8Model::add_step(Kind k, std::string node, std::string text) {
  auto s = std::make_unique<Step>();
  s->kind = k;
  s->node = std::move(node);
  s->text = std::move(text);
  m_steps.push_back(std::move(s));
  return *m_steps.back();
}

Int8Model::Step& Int8Model::add_int8_layer(Kind kind, size_t node, const Int8LayerConfig& cfg, bool hwc_flat,
                                           const Shape& hwc_of) {
  Layer& layer = m_model.layer(node);
  const std::string name = m_model.node_name(node);
  const std::vector<Param*> params = layer.params();
  LATHE_CHECK(!params.empty(), "INT8 model: ", name, " has no parameters");
  Tensor w = int8_host_copy(params[0]->value, m_be);
  Tensor b;
  if (params.size() > 1)
    b = int8_host_copy(params[1]->value, m_be);
  if (kind == Kind::int8_linear && hwc_flat)
    w = permute_flat_columns(w, hwc_of, /*to_hwc=*/true);
  return add_int8_layer(kind, node, cfg, std::move(w), std::move(b));
}

Int8Model::Step& Int8Model::add_int8_layer(Kind kind, size_t node, const Int8LayerConfig& cfg, Tensor w, Tensor b) {
  Layer& layer = m_model.layer(node);
  Step& s = add_step(kind, m_model.node_name(node), "");
  const Int8LayerData data =
      make_int8_layer(w, b.defined() && !m_dynamic ? &b : nullptr, cfg);  // dynamic: bias in the rescale
  if (kind == Kind::int8_conv) {
    const ConvParams p = static_cast<Conv2d&>(layer).conv_params();
    s.kernel = m_be.make_int8_kernel(data, &p);
  } else {
    s.kernel = m_be.make_int8_kernel(data);
  }
  s.bias = b;
  return s;
}

/// The static plan's walk over the chain: what the current value is and how it got there.
struct Int8Model::Planner {
  Planner(Int8Model& model, const ActivationParams& a, const Int8ModelOptions& o) : m(model), acts(a), options(o) {}
  Int8Model& m;
  const ActivationParams& acts;
  const Int8ModelOptions& options;
  bool quantized = false;            // is the current value quantized?
  QuantParams cur;                   // its parameters when it is
  std::string producer = kInputTap;  // the node whose output the current value is
  Shape shape;                       // per sample
  bool hwc_flat = false;             // quantized value is a flatten of channels-last [C, H, W]
  Shape hwc_of;                      // that [C, H, W]

  Model& model() { return m.m_model; }

  void to_f32(const std::string& node) {
    if (!quantized)
      return;
    Step& s = m.add_step(Kind::dequantize, node, std::string("dequantize ") + int8_dtype_word(cur) + " -> f32");
    s.params = cur;
    quantized = false;
    LATHE_CHECK(!hwc_flat, "INT8 model: internal error, dequantizing an (H, W, C) flatten");
  }

  void add_f32_layer(size_t i) {
    to_f32(model().node_name(i));
    Step& s = m.add_step(Kind::f32_layer, model().node_name(i),
                         "f32 " + model().layer(i).describe() + " '" + model().node_name(i) + "'");
    s.index = i;
  }

  Shape out_shape_of(size_t i) {
    std::vector<Shape> in_shapes{Shape{1}};
    in_shapes[0].insert(in_shapes[0].end(), shape.begin(), shape.end());
    const Shape out = model().layer(i).output_shape(in_shapes);
    return Shape(out.begin() + 1, out.end());
  }

  /// A Linear/Conv2d at node i (with the ReLU after it); returns the last node it covers.
  size_t compute(size_t i) {
    Layer& layer = model().layer(i);
    const std::string kind = layer.kind(), name = model().node_name(i);
    const bool relu = relu_follows(model(), i);
    const size_t out = relu ? i + 1 : i;
    const std::string out_name = model().node_name(out);
    const Shape out_shape = out_shape_of(i);
    if (options.keep_f32.count(name)) {
      add_f32_layer(i);
      if (relu && !fused_by_model(model(), i)) {
        Step& r = m.add_step(Kind::f32_relu, out_name, "f32 relu '" + out_name + "'");
        r.index = out;
      }
    } else {
      int8_layer(i, relu, out_name, out);
    }
    shape = out_shape;
    producer = out_name;
    return out;
  }

  void int8_layer(size_t i, bool relu, const std::string& out_name, size_t out) {
    Layer& layer = model().layer(i);
    const std::string kind = layer.kind(), name = model().node_name(i);
    if (!quantized) {
      Step& q = m.add_step(Kind::quantize, name, "");
      q.params = need(acts, producer);
      q.to_channels_last = kind == "conv2d";
      q.out_node = producer;
      q.text = std::string("quantize '") + producer + "' f32 -> " + int8_dtype_word(q.params);
      cur = q.params;
      quantized = true;
    }
    const int next = next_compute(model(), out);
    const bool quantized_out = next >= 0 && !options.keep_f32.count(model().node_name(next));
    Int8LayerConfig cfg;
    cfg.src = cur;
    if (quantized_out)
      cfg.dst = need(acts, out_name);
    cfg.post = relu ? PostOp::relu : PostOp::none;
    cfg.weight_range = options.weight_range;
    cfg.per_channel_weights = options.per_channel_weights;
    Step& s = m.add_int8_layer(kind == "conv2d" ? Kind::int8_conv : Kind::int8_linear, i, cfg,
                               kind == "linear" && hwc_flat, hwc_of);
    s.out_node = out_name;
    if (kind == "linear" && hwc_flat)
      s.hwc_of = hwc_of;
    s.text = "int8 " + layer.describe() + (relu ? "+relu" : "") + " '" + name + "' " + int8_dtype_word(cur) + " -> " +
             (quantized_out ? int8_dtype_word(*cfg.dst) : "f32") + (hwc_flat ? " (weights in H,W,C order)" : "");
    hwc_flat = false;
    quantized = quantized_out;
    if (quantized_out)
      cur = *cfg.dst;
  }

  /// Any other node: pass-through on the integers where possible, else an f32 step.
  void passthrough(size_t i) {
    Layer& layer = model().layer(i);
    const std::string kind = layer.kind(), name = model().node_name(i);
    const Shape out_shape = out_shape_of(i);
    if (kind == "dropout") {
      // Identity at inference: nothing to run; the value keeps its producer.
    } else if (kind == "maxpool2d" && quantized) {
      Step& s = m.add_step(Kind::int8_maxpool, name,
                           std::string("int8 ") + layer.describe() + " '" + name + "' " + int8_dtype_word(cur));
      s.pool = static_cast<MaxPool2d&>(layer).pool_params();
      producer = name;
    } else if (kind == "relu" && quantized) {
      Step& s = m.add_step(Kind::int8_relu, name, std::string("int8 relu '") + name + "' " + int8_dtype_word(cur));
      s.params = cur;
      producer = name;
    } else if (kind == "flatten" && quantized && shape.size() == 3) {
      const int next = next_compute(model(), i);
      if (next >= 0 && model().layer(next).kind() == "linear" && !options.keep_f32.count(model().node_name(next))) {
        m.add_step(Kind::flatten_q, name,
                   std::string("flatten '") + name + "' " + int8_dtype_word(cur) + " in (H, W, C) order");
        hwc_flat = true;
        hwc_of = shape;
      } else {
        add_f32_layer(i);
      }
      producer = name;
    } else if (kind == "flatten" && quantized) {
      producer = name;  // already flat: nothing to do
    } else {
      add_f32_layer(i);
      producer = name;
    }
    shape = out_shape;
  }
};

void Int8Model::plan_static(const ActivationParams& acts, const Int8ModelOptions& options) {
  Planner p(*this, acts, options);
  p.shape = m_model.input_shape();
  for (size_t i = 0; i < m_model.size(); ++i) {
    if (is_int8_compute_kind(m_model.layer(i).kind()))
      i = p.compute(i);
    else
      p.passthrough(i);
  }
  p.to_f32("output");
}

void Int8Model::plan_dynamic(const Int8ModelOptions& options) {
  m_dynamic = true;
  Model& model = m_model;
  bool nonneg = false;  // is the current value >= 0 (after a ReLU)?
  for (size_t i = 0; i < model.size(); ++i) {
    Layer& layer = model.layer(i);
    const std::string kind = layer.kind(), name = model.node_name(i);
    if (!is_int8_compute_kind(kind) || options.keep_f32.count(name)) {
      Step& s = add_step(Kind::f32_layer, name, "f32 " + layer.describe() + " '" + name + "'");
      s.index = i;
      if (kind == "relu")
        nonneg = true;
      else if (is_int8_compute_kind(kind))
        nonneg = fused_by_model(model, i);
      continue;
    }
    const bool relu = relu_follows(model, i);
    // The layer runs on integers with a unit input scale; the batch's scale and the bias are
    // applied to its f32 output by the rescale step.
    Int8LayerConfig cfg;
    cfg.src = make_quant_params(0.0, 1.0, 8, /*symmetric=*/true, /*is_signed=*/!nonneg);
    cfg.src.scale = {1.0f};
    cfg.weight_range = options.weight_range;
    cfg.per_channel_weights = options.per_channel_weights;
    Step& q = add_step(Kind::dynamic_quantize, name,
                       std::string("quantize per batch f32 -> ") + (nonneg ? "u8" : "s8") + " (symmetric, max |x|)");
    q.params = cfg.src;
    q.to_channels_last = kind == "conv2d";
    Step& s = add_int8_layer(kind == "conv2d" ? Kind::int8_conv : Kind::int8_linear, i, cfg, false, {});
    s.text = "int8 " + layer.describe() + " '" + name + "' " + int8_dtype_word(cfg.src) + " -> f32";
    s.out_node = model.node_name(relu ? i + 1 : i);
    Step& r = add_step(Kind::dynamic_rescale, name, std::string("rescale x s_x + bias") + (relu ? " + relu" : ""));
    r.bias = s.bias;
    r.relu = relu;
    nonneg = relu;
    if (relu)
      ++i;  // the ReLU is applied by the rescale step
  }
}

std::string Int8Model::refusal() const {
  if (m_be.device().is_cpu())
    return "";
  if (m_dynamic)
    return "dynamic INT8 (quant.mode ptq-dynamic) takes each batch's max |x| and rescales in f32 between layers on "
           "the host; backend '" +
           m_be.name() + "' runs static (calibrated) plans only";
  for (const auto& sp : m_steps) {
    const Step& s = *sp;
    const bool ok = (s.kind == Kind::quantize && m_be.supports(Op::quantize, s.params.storage_dtype())) ||
                    s.kind == Kind::int8_conv || s.kind == Kind::int8_linear ||
                    (s.kind == Kind::int8_maxpool && m_be.supports(Op::maxpool2d, DType::u8)) ||
                    (s.kind == Kind::int8_relu && m_be.supports(Op::relu, DType::u8)) || s.kind == Kind::flatten_q ||
                    (s.kind == Kind::f32_layer && const_cast<Model&>(m_model).layer(s.index).kind() == "flatten");
    if (!ok)
      return "step '" + s.text +
             "' runs in f32 (a layer kept in f32 by keep_f32 / mixed precision, or f32 between "
             "INT8 layers); backend '" +
             m_be.name() + "' runs INT8 layers, integer max pooling / ReLU and flatten only";
  }
  return "";
}

std::string Int8Model::kernels() const {
  for (const auto& s : m_steps)
    if (s->kernel)
      return s->kernel->implementation().empty() ? m_be.name() : s->kernel->implementation() + " (" + m_be.name() + ")";
  return m_be.name();
}

Tensor Int8Model::forward(const Tensor& images) {
  LATHE_CHECK(images.dtype() == DType::f32 && images.ndim() >= 1,
              "Int8Model::forward: images must be f32 [N, ...], got ", images.describe());
  const std::string why = refusal();
  if (!why.empty())
    throw ConfigError("INT8 on " + m_be.device_name() + ": " + why);
  Tensor x = images;
  if (x.device() != m_be.device()) {
    Tensor d = m_be.empty(x.shape(), DType::f32, x.format());
    m_be.copy(x, d);
    x = d;
  }
  const int64_t N = x.dim(0);
  Shape want{N};
  want.insert(want.end(), m_model.input_shape().begin(), m_model.input_shape().end());
  if (x.shape() != want) {
    LATHE_CHECK(shape_numel(want) == x.numel() && x.is_contiguous(), "Int8Model::forward: images ", x.describe(),
                " do not match the model input ", shape_str(want));
    x = x.view(want);
  }
  LayerContext ctx{m_be, false, 0};
  if (m_result_slot >= 0)
    return forward_graph(x, ctx);
  for (const auto& sp : m_steps) {
    Step& s = *sp;
    const auto t0 = m_profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    x = run_step(s, x, ctx);
    if (m_profiling) {
      m_be.synchronize();
      s.seconds += seconds_since(t0);
    }
  }
  return x;
}

namespace {

/// x in the layout the next step reads: channels-last for a conv consumer, else dense (a copy
/// through the backend only when needed).
Tensor dense_for(Backend& be, const Tensor& x, bool channels_last) {
  if (channels_last && x.ndim() == 4 && !x.is_channels_last()) {
    Tensor cl = be.empty(x.shape(), x.dtype(), MemoryFormat::channels_last);
    be.copy(x, cl);
    return cl;
  }
  if (x.is_contiguous() || x.is_channels_last())
    return x;
  Tensor c = be.empty(x.shape(), x.dtype());
  be.copy(x, c);
  return c;
}

}  // namespace

Tensor Int8Model::run_step(Step& s, Tensor x, LayerContext& ctx) {
  switch (s.kind) {
    case Kind::quantize: {
      x = dense_for(m_be, x, s.to_channels_last);
      Tensor q = m_be.empty(x.shape(), s.params.storage_dtype(), x.format());
      m_be.quantize(x, s.params, q);
      return q;
    }
    case Kind::dequantize: {
      Tensor f = m_be.empty(x.shape(), DType::f32, x.format());
      m_be.dequantize(x, s.params, f);
      return f;
    }
    case Kind::int8_conv:
    case Kind::int8_linear:
      return s.kernel->forward(x);
    case Kind::int8_maxpool: {
      if (s.pool_fused)
        return x;
      const PoolParams& p = s.pool;
      const Shape out{x.dim(0), x.dim(1), conv_out_size(x.dim(2), p.kernel_h, p.stride_h, p.pad_h),
                      conv_out_size(x.dim(3), p.kernel_w, p.stride_w, p.pad_w)};
      Tensor y = m_be.empty(out, x.dtype(), MemoryFormat::channels_last);
      m_be.int8_maxpool2d(p, x, y);
      return y;
    }
    case Kind::int8_relu:
      x = dense_for(m_be, x, false);
      m_be.int8_relu(x, s.params.zero_point[0]);
      return x;
    case Kind::flatten_q:
      // Channels-last [N, C, H, W] holds N rows of H*W*C values: the next Linear reads them as
      // [N, H*W*C] (its weight columns are in (H, W, C) order), a view, no copy.
      LATHE_CHECK(x.ndim() == 4 && x.is_channels_last() && x.is_dense(),
                  "Int8Model: flatten expects channels-last, got ", x.describe());
      return x.reinterpret({x.dim(0), x.numel() / std::max<int64_t>(x.dim(0), 1)});
    case Kind::dynamic_quantize:
      return dynamic_quantize(s, dense_for(m_be, x, s.to_channels_last));
    case Kind::dynamic_rescale:
      dynamic_rescale(s, x);
      return x;
    case Kind::int8_add:
      LATHE_FAIL("Int8Model: an add step runs in a graph plan only");
    case Kind::f32_layer:
    case Kind::f32_relu: {
      Layer& layer = m_model.layer(s.index);
      const std::vector<const Tensor*> src{&x};
      Tensor dst = m_be.empty(layer.output_shape({x.shape()}), DType::f32, layer.output_format(m_be, src));
      layer.forward(ctx, src, dst);
      return dst;
    }
  }
  LATHE_FAIL("Int8Model: unknown step '", s.text, "'");
}

Tensor Int8Model::dynamic_quantize(const Step& s, const Tensor& x) {
  const float* v = x.data<float>();
  float mx = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    mx = std::max(mx, std::fabs(v[i]));
  QuantParams p = s.params;
  m_batch_scale = mx > 0 ? mx / static_cast<float>(p.qmax()) : 1.0f;
  p.scale = {m_batch_scale};
  Tensor q = m_be.empty(x.shape(), p.storage_dtype(), x.format());
  m_be.quantize(x, p, q);
  return q;
}

void Int8Model::dynamic_rescale(const Step& s, Tensor& x) const {
  // x: f32 [N, O] or channels-last [N, O, H, W]: the channel is the innermost dimension.
  LATHE_CHECK(x.dtype() == DType::f32 && x.is_dense(), "Int8Model: rescale expects dense f32, got ", x.describe());
  float* v = x.data<float>();
  const int64_t O = x.dim(1), n = x.numel();
  const float* b = s.bias.defined() ? s.bias.data<float>() : nullptr;
  const float sx = m_batch_scale;
  for (int64_t i = 0; i < n; ++i) {
    float y = v[i] * sx + (b ? b[i % O] : 0.0f);
    v[i] = s.relu && y < 0 ? 0.0f : y;
  }
}

std::vector<std::pair<std::string, Tensor>> Int8Model::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& sp : m_steps) {
    const Step& s = *sp;
    if (s.kind == Kind::int8_conv || s.kind == Kind::int8_linear) {
      const Int8LayerData& L = s.kernel->layer();
      t.emplace_back(s.node + ".weight", L.weights_q);
      Tensor ws = Tensor::empty({L.out_channels()}, DType::f32);
      std::memcpy(ws.raw(), L.weights.scale.data(), ws.nbytes());
      t.emplace_back(s.node + ".weight_scale", ws);
      if (s.bias.defined())
        t.emplace_back(s.node + ".bias", s.bias);
      if (!m_dynamic) {  // dynamic: the input scale is taken from each batch
        t.emplace_back(s.node + ".input_scale", scalar_f32(L.config.src.scale[0]));
        t.emplace_back(s.node + ".input_zero_point", scalar_s32(L.config.src.zero_point[0]));
      }
      if (L.config.dst) {
        t.emplace_back(s.node + ".output_scale", scalar_f32(L.config.dst->scale[0]));
        t.emplace_back(s.node + ".output_zero_point", scalar_s32(L.config.dst->zero_point[0]));
      }
    } else if (s.kind == Kind::f32_layer) {
      for (Param* p : m_model.layer(s.index).params())
        t.emplace_back(s.node + "." + p->name, int8_host_copy(p->value, m_be));
      for (Buffer* b : m_model.layer(s.index).buffers())  // a BatchNorm's running statistics
        if (b->value.dtype() == DType::f32)
          t.emplace_back(s.node + "." + b->name, int8_host_copy(b->value, m_be));
    }
  }
  return t;
}

int64_t Int8Model::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "lathe-int8";
  meta["activations"] = m_dynamic ? "dynamic (symmetric, per batch)" : "static (calibrated)";
  meta["plan"] = plan();
  meta["weight_bits"] = std::to_string(weight_bits());
  meta["cpu_isa"] = cpu_int8_isa_name();
  save_safetensors(path, state_tensors(), meta);
  return static_cast<int64_t>(std::filesystem::file_size(path));
}

int64_t Int8Model::serialized_bytes() const {
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("lathe-int8-size-" + std::to_string(::getpid()) + "-" +
                                                std::to_string(reinterpret_cast<uintptr_t>(this)) + ".safetensors");
  const int64_t bytes = save(tmp.string());
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  return bytes;
}

std::vector<std::pair<std::string, double>> Int8Model::profile() const {
  std::vector<std::pair<std::string, double>> p;
  for (const auto& s : m_steps)
    p.emplace_back(s->text, s->seconds);
  return p;
}

std::string Int8Model::plan() const {
  std::ostringstream o;
  for (const auto& s : m_steps)
    o << s->text << "\n";
  return o.str();
}

std::vector<Int8LayerQuantization> Int8Model::layer_quantization() const {
  std::vector<Int8LayerQuantization> out;
  for (const auto& s : m_steps)
    if (s->kernel) {
      const Int8LayerData& L = s->kernel->layer();
      out.push_back({s->node, L.config.src, L.weights.bits, L.config.per_channel_weights});
    }
  return out;
}

int Int8Model::int8_layers() const {
  int n = 0;
  for (const auto& s : m_steps)
    n += s->kind == Kind::int8_conv || s->kind == Kind::int8_linear;
  return n;
}

int Int8Model::f32_layers() const {
  int n = 0;
  for (const auto& s : m_steps)
    n += s->kind == Kind::f32_layer && is_int8_compute_kind(m_model.layer(s->index).kind());
  return n;
}

int Int8Model::weight_bits() const {
  for (const auto& s : m_steps)
    if (s->kernel)
      return s->kernel->layer().weights.bits;
  return 0;
}

}  // namespace lathe
