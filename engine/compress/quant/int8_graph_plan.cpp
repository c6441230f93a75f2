// Int8Model's graph plan (see "Graphs" in int8_model.h): the nodes in order over value slots, each
// value kept quantized, f32 or both; BatchNorm folding, residual Add, f32 BatchNorm steps.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "engine/compress/quant/int8_graph.h"
#include "engine/compress/quant/int8_model.h"
#include "engine/compress/quant/int8_plan_util.h"
#include "engine/nn/batchnorm2d.h"
#include "engine/nn/maxpool2d.h"

namespace lathe {

namespace {

using Kind = Int8Model::Step::Kind;

}  // namespace

struct Int8Model::GraphPlanner {
  /// One node's value: where it is kept (slots; -1 = not in that form) and its shape per sample.
  struct Value {
    Shape shape;
    int f32 = -1;
    int q = -1;
    QuantParams qp;         // the quantized form's parameters
    bool hwc_flat = false;  // the quantized form is a flatten of channels-last [C, H, W] (hwc_of)
    Shape hwc_of;

    static Value f32_at(Shape shape, int slot) {
      Value v;
      v.shape = std::move(shape);
      v.f32 = slot;
      return v;
    }
    static Value q_at(Shape shape, int slot, const QuantParams& qp) {
      Value v;
      v.shape = std::move(shape);
      v.q = slot;
      v.qp = qp;
      return v;
    }
  };

  GraphPlanner(Int8Model& model, const ActivationParams& a, const Int8ModelOptions& o)
      : m(model), acts(a), options(o), consumers(node_consumers(model.m_model)), covered(model.m_model.size(), 0) {}
  Int8Model& m;
  const ActivationParams& acts;
  const Int8ModelOptions& options;
  std::vector<std::vector<int>> consumers;
  std::map<std::string, Value> values;  // by node name, kInputTap for the model input
  std::vector<char> covered;            // nodes folded or fused into an earlier step

  Model& model() { return m.m_model; }
  std::string input_name(size_t i, size_t k) {
    const int j = model().node_inputs(i).at(k);
    return j == Model::kModelInput ? kInputTap : model().node_name(static_cast<size_t>(j));
  }
  bool is_output(size_t i) { return i + 1 == model().size(); }

  const QuantParams& need(const std::string& key) {
    const auto it = acts.find(key);
    LATHE_CHECK(it != acts.end(), "INT8 model: no activation parameters for '", key, "'");
    LATHE_CHECK(!it->second.per_channel() && it->second.bits == 8, "INT8 model: activation parameters of '", key,
                "' must be 8-bit per tensor, got ", it->second.describe());
    return it->second;
  }

  Step& step(Kind k, const std::string& node, std::string text, std::vector<int> in) {
    Step& s = m.add_step(k, node, std::move(text));
    s.in_slots = std::move(in);
    s.out_slot = m.m_slots++;
    return s;
  }

  /// The slot of the value in f32 (a dequantize step the first time it is needed).
  int as_f32(const std::string& name) {
    Value& v = values.at(name);
    if (v.f32 >= 0)
      return v.f32;
    LATHE_CHECK(!v.hwc_flat, "INT8 model: internal error, dequantizing the (H, W, C) flatten '", name, "'");
    Step& s = step(Kind::dequantize, name, "dequantize '" + name + "' " + int8_dtype_word(v.qp) + " -> f32", {v.q});
    s.params = v.qp;
    return v.f32 = s.out_slot;
  }

  /// The slot of the value quantized (with its node's calibrated range the first time); images are
  /// made channels-last, the layout of the INT8 conv, pooling and add.
  int as_q(const std::string& name) {
    Value& v = values.at(name);
    if (v.q >= 0)
      return v.q;
    Step& s = step(Kind::quantize, name, "", {v.f32});
    s.params = need(name);
    s.out_node = name;
    s.to_channels_last = v.shape.size() == 3;
    s.text = "quantize '" + name + "' f32 -> " + int8_dtype_word(s.params);
    v.qp = s.params;
    return v.q = s.out_slot;
  }

  /// Whether another node's value lives in the same slot (a dropout aliases its input): an
  /// in-place step on it would change what that node's readers see.
  bool shared(const std::string& name) {
    const Value& v = values.at(name);
    for (const auto& [other, w] : values)
      if (other != name && w.q == v.q)
        return true;
    return false;
  }

  Shape out_shape_of(size_t i) {
    std::vector<Shape> in;
    for (size_t k = 0; k < model().node_inputs(i).size(); ++k) {
      Shape s{1};
      const Shape& per = values.at(input_name(i, k)).shape;
      s.insert(s.end(), per.begin(), per.end());
      in.push_back(s);
    }
    const Shape out = model().layer(i).output_shape(in);
    return Shape(out.begin() + 1, out.end());
  }

  void f32_layer(size_t i) {
    const std::string name = model().node_name(i);
    std::vector<int> in;
    for (size_t k = 0; k < model().node_inputs(i).size(); ++k)
      in.push_back(as_f32(input_name(i, k)));
    const Shape shape = out_shape_of(i);
    Step& s = step(Kind::f32_layer, name, "f32 " + model().layer(i).describe() + " '" + name + "'", in);
    s.index = i;
    values[name] = Value::f32_at(shape, s.out_slot);
  }

  /// A Linear/Conv2d, with a BatchNorm folded in and the ReLU after it fused where they allow.
  void compute(size_t i) {
    Layer& layer = model().layer(i);
    const std::string kind = layer.kind(), name = model().node_name(i);
    if (options.keep_f32.count(name)) {
      f32_layer(i);
      if (const int r = relu_fused_by_model(model(), consumers, i); r >= 0) {  // the f32 layer applies it
        values[model().node_name(r)] = values.at(name);
        covered[r] = 1;
      }
      return;
    }
    const int bn = foldable_batchnorm(model(), consumers, i);
    const size_t last = bn >= 0 ? static_cast<size_t>(bn) : i;
    int relu = -1;
    if (consumers[last].size() == 1 && model().layer(consumers[last][0]).kind() == "relu")
      relu = consumers[last][0];
    const size_t out = relu >= 0 ? static_cast<size_t>(relu) : last;
    const std::string out_name = model().node_name(out), in_name = input_name(i, 0);
    const Shape shape = out_shape_of(i);
    const int src = as_q(in_name);
    const Value& in = values.at(in_name);
    Int8LayerConfig cfg;
    cfg.src = in.qp;
    const bool quantized_out = !is_output(out);
    if (quantized_out)
      cfg.dst = need(out_name);
    cfg.post = relu >= 0 ? PostOp::relu : PostOp::none;
    cfg.weight_range = options.weight_range;
    cfg.per_channel_weights = options.per_channel_weights;
    const Kind k = kind == "conv2d" ? Kind::int8_conv : Kind::int8_linear;
    const bool hwc = k == Kind::int8_linear && in.hwc_flat;
    const Shape hwc_of = in.hwc_of;
    Step* s = nullptr;
    if (bn >= 0) {
      auto& norm = static_cast<BatchNorm2d&>(model().layer(static_cast<size_t>(bn)));
      const std::vector<Param*> p = layer.params(), np = norm.params();
      const std::vector<Buffer*> nb = norm.buffers();
      const Tensor w = int8_host_copy(p[0]->value, m.m_be);
      const Tensor b = p.size() > 1 ? int8_host_copy(p[1]->value, m.m_be) : Tensor();
      FoldedConv f =
          fold_batchnorm(w, b.defined() ? &b : nullptr, int8_host_copy(np[0]->value, m.m_be), int8_host_copy(np[1]->value, m.m_be),
                         int8_host_copy(nb[0]->value, m.m_be), int8_host_copy(nb[1]->value, m.m_be), norm.bn_params().eps);
      s = &m.add_int8_layer(k, i, cfg, std::move(f.weight), std::move(f.bias));
      s->folded_bn = model().node_name(static_cast<size_t>(bn));
      covered[bn] = 1;
    } else {
      s = &m.add_int8_layer(k, i, cfg, hwc, hwc_of);
    }
    s->in_slots = {src};
    s->out_slot = m.m_slots++;
    s->out_node = out_name;
    if (hwc)
      s->hwc_of = hwc_of;
    s->text = "int8 " + layer.describe() + (bn >= 0 ? "+" + s->folded_bn + " (folded)" : "") +
              (relu >= 0 ? "+relu" : "") + " '" + name + "' " + int8_dtype_word(cfg.src) + " -> " +
              (quantized_out ? int8_dtype_word(*cfg.dst) : "f32") + (hwc ? " (weights in H,W,C order)" : "");
    if (relu >= 0)
      covered[relu] = 1;
    values[out_name] = quantized_out ? Value::q_at(shape, s->out_slot, *cfg.dst) : Value::f32_at(shape, s->out_slot);
  }

  void other(size_t i) {
    Layer& layer = model().layer(i);
    const std::string kind = layer.kind(), name = model().node_name(i);
    const std::string in_name = input_name(i, 0);
    const Value in = values.at(in_name);
    const bool quantized_only = in.q >= 0 && in.f32 < 0;
    if (kind == "dropout") {  // identity at inference
      values[name] = in;
    } else if (kind == "relu" && quantized_only && consumers[model().node_inputs(i)[0]].size() == 1 &&
               !shared(in_name)) {
      Step& s = step(Kind::int8_relu, name, std::string("int8 relu '") + name + "' " + int8_dtype_word(in.qp), {in.q});
      s.params = in.qp;
      values[name] = Value::q_at(in.shape, s.out_slot, in.qp);
    } else if (kind == "maxpool2d" && in.q >= 0) {
      Step& s =
          step(Kind::int8_maxpool, name, "int8 " + layer.describe() + " '" + name + "' " + int8_dtype_word(in.qp), {in.q});
      s.pool = static_cast<MaxPool2d&>(layer).pool_params();
      values[name] = Value::q_at(out_shape_of(i), s.out_slot, in.qp);
    } else if (kind == "flatten" && in.q >= 0 && in.shape.size() == 1) {
      values[name] = in;  // already flat
    } else if (kind == "flatten" && in.q >= 0 && in.shape.size() == 3 && consumers[i].size() == 1 &&
               model().layer(consumers[i][0]).kind() == "linear" &&
               !options.keep_f32.count(model().node_name(consumers[i][0]))) {
      Step& s =
          step(Kind::flatten_q, name, "flatten '" + name + "' " + int8_dtype_word(in.qp) + " in (H, W, C) order", {in.q});
      Value v = Value::q_at(out_shape_of(i), s.out_slot, in.qp);
      v.hwc_flat = true;
      v.hwc_of = in.shape;
      values[name] = v;
    } else if (kind == "add" && !is_output(i)) {
      const std::string b_name = input_name(i, 1);
      const int qa = as_q(in_name), qb = as_q(b_name);
      const QuantParams& out = need(name);
      Step& s = step(Kind::int8_add, name,
                     "int8 add '" + name + "' (dequantize-add-quantize) " + int8_dtype_word(values.at(in_name).qp) + " + " +
                         int8_dtype_word(values.at(b_name).qp) + " -> " + int8_dtype_word(out),
                     {qa, qb});
      s.params_a = values.at(in_name).qp;
      s.params_b = values.at(b_name).qp;
      s.params = out;
      values[name] = Value::q_at(out_shape_of(i), s.out_slot, out);
    } else {
      f32_layer(i);  // batchnorm2d that cannot be folded, and everything on f32 values
    }
  }
};

void Int8Model::plan_graph(const ActivationParams& acts, const Int8ModelOptions& options) {
  GraphPlanner p(*this, acts, options);
  m_slots = 1;  // slot 0: the model input
  p.values[kInputTap] = GraphPlanner::Value::f32_at(m_model.input_shape(), 0);
  for (size_t i = 0; i < m_model.size(); ++i) {
    if (p.covered[i])
      continue;
    if (is_int8_compute_kind(m_model.layer(i).kind()))
      p.compute(i);
    else
      p.other(i);
  }
  m_result_slot = p.as_f32(m_model.node_name(m_model.size() - 1));
}

Tensor Int8Model::forward_graph(Tensor x, LayerContext& ctx) {
  std::vector<Tensor> slots(static_cast<size_t>(m_slots));
  slots[0] = x;
  for (const auto& sp : m_steps) {
    Step& s = *sp;
    const auto t0 = m_profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    Tensor y;
    if (s.kind == Kind::int8_add) {
      y = int8_add(s, slots.at(s.in_slots.at(0)), slots.at(s.in_slots.at(1)));
    } else if (s.kind == Kind::f32_layer && s.in_slots.size() > 1) {
      Layer& layer = m_model.layer(s.index);
      std::vector<const Tensor*> src;
      std::vector<Shape> shapes;
      for (int k : s.in_slots) {
        src.push_back(&slots.at(k));
        shapes.push_back(slots.at(k).shape());
      }
      y = m_be.empty(layer.output_shape(shapes), DType::f32, layer.output_format(m_be, src));
      layer.forward(ctx, src, y);
    } else {
      y = run_step(s, slots.at(s.in_slots.at(0)), ctx);
    }
    slots.at(s.out_slot) = y;
    if (m_profiling) {
      m_be.synchronize();
      s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  return slots.at(m_result_slot);
}

namespace {

template <typename A, typename B, typename Y>
void add_dequantized(const A* a, const B* b, Y* y, int64_t n, const QuantParams& pa, const QuantParams& pb,
                     const QuantParams& py) {
  const float sa = pa.scale[0], sb = pb.scale[0], sy = py.scale[0];
  const int32_t za = pa.zero_point[0], zb = pb.zero_point[0], zy = py.zero_point[0];
  const float lo = static_cast<float>(py.qmin()), hi = static_cast<float>(py.qmax());
  for (int64_t i = 0; i < n; ++i) {
    // As DequantizeLinear x2 -> Add -> QuantizeLinear in f32: one rounding, half to even.
    const float v = static_cast<float>(a[i] - za) * sa + static_cast<float>(b[i] - zb) * sb;
    y[i] = static_cast<Y>(std::clamp(std::nearbyint(v / sy) + static_cast<float>(zy), lo, hi));
  }
}

template <typename A, typename B>
void add_to(const Tensor& a, const Tensor& b, Tensor& y, const QuantParams& pa, const QuantParams& pb,
            const QuantParams& py) {
  if (y.dtype() == DType::u8)
    add_dequantized(a.data<A>(), b.data<B>(), y.data<uint8_t>(), y.numel(), pa, pb, py);
  else
    add_dequantized(a.data<A>(), b.data<B>(), y.data<int8_t>(), y.numel(), pa, pb, py);
}

template <typename A>
void add_b(const Tensor& a, const Tensor& b, Tensor& y, const QuantParams& pa, const QuantParams& pb,
           const QuantParams& py) {
  if (b.dtype() == DType::u8)
    add_to<A, uint8_t>(a, b, y, pa, pb, py);
  else
    add_to<A, int8_t>(a, b, y, pa, pb, py);
}

}  // namespace

Tensor Int8Model::int8_add(const Step& s, const Tensor& a_in, const Tensor& b_in) {
  LATHE_CHECK(a_in.device().is_cpu() && b_in.device().is_cpu(), "Int8Model: the add step runs on the host, got ",
              a_in.describe(), " and ", b_in.describe());
  LATHE_CHECK(a_in.shape() == b_in.shape(), "Int8Model: add of ", a_in.describe(), " and ", b_in.describe());
  Tensor a = a_in, b = b_in;
  if (!a.is_dense()) {
    a = m_be.empty(a_in.shape(), a_in.dtype());
    m_be.copy(a_in, a);
  }
  if (b.strides() != a.strides()) {  // bring the second to the first's layout
    b = m_be.empty(b_in.shape(), b_in.dtype(), a.format());
    m_be.copy(b_in, b);
  }
  Tensor y = m_be.empty(a.shape(), s.params.storage_dtype(), a.format());
  LATHE_CHECK(y.strides() == a.strides(), "Int8Model: add output layout differs from its input ", a.describe());
  if (a.dtype() == DType::u8)
    add_b<uint8_t>(a, b, y, s.params_a, s.params_b, s.params);
  else
    add_b<int8_t>(a, b, y, s.params_a, s.params_b, s.params);
  return y;
}

}  // namespace lathe
