// TimedLayer: per-node forward/backward wall or thread-CPU time (see the header).
#include "engine/nn/timed_layer.h"

#include <chrono>

#include "engine/core/timing.h"

namespace lathe {

double layer_clock_seconds(LayerClock clock) {
  if (clock == LayerClock::thread_cpu)
    return thread_cpu_seconds();
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

TimedLayer::TimedLayer(std::unique_ptr<Layer> inner, LayerClock clock) : m_inner(std::move(inner)), m_clock(clock) {
  LATHE_CHECK(m_inner != nullptr, "TimedLayer: no layer to time");
}

void TimedLayer::forward(LayerContext& ctx, const std::vector<const Tensor*>& src, Tensor& dst) {
  const double t0 = layer_clock_seconds(m_clock);
  m_inner->forward(ctx, src, dst);
  ctx.backend.synchronize();  // a device backend queues the work: wait so its time lands here
  m_forward_s += layer_clock_seconds(m_clock) - t0;
  ++m_forward_calls;
}

void TimedLayer::backward(LayerContext& ctx, const std::vector<const Tensor*>& src, const Tensor& dst,
                          const Tensor& diff_dst, const std::vector<Tensor*>& diff_src) {
  const double t0 = layer_clock_seconds(m_clock);
  m_inner->backward(ctx, src, dst, diff_dst, diff_src);
  ctx.backend.synchronize();
  m_backward_s += layer_clock_seconds(m_clock) - t0;
  ++m_backward_calls;
}

void TimedLayer::reset() {
  m_forward_s = m_backward_s = 0;
  m_forward_calls = m_backward_calls = 0;
}

std::vector<TimedLayer*> time_every_layer(Model& model, LayerClock clock) {
  std::vector<TimedLayer*> timed;
  for (size_t i = 0; i < model.size(); ++i) {
    // replace_layer() wants a layer that fits the node: a fresh copy of the original stands in
    // until the original itself comes back out and goes inside the wrapper.
    std::unique_ptr<Layer> stand_in = model.layer(i).fresh_copy();
    LATHE_CHECK(stand_in != nullptr, "time_every_layer: node '", model.node_name(i), "' (", model.layer(i).describe(),
                ") cannot be copied, so it cannot be wrapped");
    auto wrapper = std::make_unique<TimedLayer>(std::move(stand_in), clock);
    TimedLayer* w = wrapper.get();
    std::unique_ptr<Layer> original = model.replace_layer(i, std::move(wrapper));
    w->m_inner = std::move(original);
    timed.push_back(w);
  }
  return timed;
}

}  // namespace lathe
