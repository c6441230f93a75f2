// GlooCommunicator over Gloo's tcp transport (see gloo_communicator.h).
#include "engine/dist/gloo_communicator.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "engine/core/error.h"
#include "engine/dist/rendezvous.h"

namespace lathe::dist {

using detail::concat;

struct GlooCommunicator::Impl {
  OpenedStore opened;
  std::unique_ptr<PrefixedStore> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
};

namespace {

// A host f32 tensor whose elements are dense in memory (any dimension order: every rank has the
// same layout, so memory order is the same order everywhere).
float* host_f32(const Tensor& t, const std::string& what) {
  if (!t.device().is_cpu())
    throw Error(concat("GlooCommunicator: ", what, " is on ", t.device().str(),
                       "; Gloo ranks reduce host tensors only (GPU ranks use NCCL)"));
  if (t.dtype() != DType::f32)
    throw Error(concat("GlooCommunicator: ", what, " is ", dtype_name(t.dtype()), "; gradients are reduced as f32"));
  if (!t.is_dense())
    throw Error(concat("GlooCommunicator: ", what, " is not dense in memory"));
  return static_cast<float*>(t.raw());
}

}  // namespace

GlooCommunicator::GlooCommunicator(int rank, int world_size, const GlooOptions& options)
    : m_impl(std::make_unique<Impl>()), m_rank(rank), m_world_size(world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw ConfigError(
        concat("GlooCommunicator: rank ", rank, " of world size ", world_size, " (ranks are 0..world size - 1)"));
  if (!(options.timeout_s > 0))
    throw ConfigError(concat("compute.timeout_s = ", options.timeout_s, ": must be > 0 seconds"));
  if (!(options.bucket_mb > 0))
    throw ConfigError(concat("compute.bucket_mb = ", options.bucket_mb, ": must be > 0 MiB"));
  if (options.run_id.empty())
    throw ConfigError("GlooCommunicator: the run id (store prefix) is empty");
  m_bucket_elements = std::max<int64_t>(1, static_cast<int64_t>(options.bucket_mb * 1024 * 1024 / sizeof(float)));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(options.timeout_s * 1000)));

  m_impl->opened = open_store(options.rendezvous);
  m_impl->store = std::make_unique<PrefixedStore>(options.run_id, *m_impl->opened.store);
  const std::string& where = m_impl->opened.description;
  join_ranks(*m_impl->store, where, rank, world_size, timeout);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.host;
    m_impl->device = gloo::transport::tcp::CreateDevice(attr);
    m_impl->context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
    m_impl->context->setTimeout(timeout);
    m_impl->context->connectFullMesh(*m_impl->store, m_impl->device);
  } catch (const std::exception& e) {
    throw Error(concat("rank ", rank, " of ", world_size, ": connecting through the ", where, " on ", options.host,
                       " failed: ", e.what()));
  }
}

GlooCommunicator::~GlooCommunicator() = default;

const std::string& GlooCommunicator::store_description() const { return m_impl->opened.description; }

void GlooCommunicator::all_reduce_gradients(const std::vector<NamedParam>& params) {
  m_last_buckets = 0;
  if (m_world_size == 1)
    return;
  // (pointer, elements) of every gradient, last parameter first.
  std::vector<std::pair<float*, int64_t>> grads;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& g = it->param->grad;
    if (!g.defined())
      continue;  // a frozen parameter: the same on every rank (one model)
    grads.emplace_back(host_f32(g, "the gradient of " + it->name), g.numel());
  }
  m_bucket.resize(static_cast<size_t>(m_bucket_elements));
  const float divisor = static_cast<float>(m_world_size);
  // The gradients as one stream cut into buckets: a bucket may hold many parameters, or part of one.
  size_t gi = 0;
  int64_t offset = 0;  // into grads[gi]
  while (gi < grads.size()) {
    // Fill.
    std::vector<std::tuple<size_t, int64_t, int64_t>> pieces;  // (grad, offset, count)
    int64_t filled = 0;
    while (gi < grads.size() && filled < m_bucket_elements) {
      const int64_t n = std::min(grads[gi].second - offset, m_bucket_elements - filled);
      std::memcpy(m_bucket.data() + filled, grads[gi].first + offset, n * sizeof(float));
      pieces.emplace_back(gi, offset, n);
      filled += n;
      offset += n;
      if (offset == grads[gi].second)
        ++gi, offset = 0;
    }
    try {
      gloo::AllreduceOptions opts(m_impl->context);
      opts.setOutput(m_bucket.data(), static_cast<size_t>(filled));
      opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(opts);
    } catch (const std::exception& e) {
      throw Error(concat("rank ", m_rank, ": gradient all-reduce failed: ", e.what()));
    }
    ++m_last_buckets;
    const float* src = m_bucket.data();
    for (auto [g, off, n] : pieces) {
      float* dst = grads[g].first + off;
      for (int64_t i = 0; i < n; ++i)
        dst[i] = src[i] / divisor;
      src += n;
    }
  }
}

void GlooCommunicator::broadcast_parameters(const std::vector<NamedParam>& params, int root) {
  if (root < 0 || root >= m_world_size)
    throw Error(concat("GlooCommunicator: broadcast root ", root, " is not a rank of ", m_world_size));
  if (m_world_size == 1)
    return;
  for (const auto& p : params) {
    const Tensor& v = p.param->value;
    float* data = host_f32(v, "parameter " + p.name);
    try {
      gloo::BroadcastOptions opts(m_impl->context);
      opts.setOutput(data, static_cast<size_t>(v.numel()));
      opts.setRoot(root);
      gloo::broadcast(opts);
    } catch (const std::exception& e) {
      throw Error(concat("rank ", m_rank, ": broadcast of ", p.name, " from rank ", root, " failed: ", e.what()));
    }
  }
}

void GlooCommunicator::all_reduce_sum(double* values, int64_t n) {
  if (m_world_size == 1 || n == 0)
    return;
  try {
    gloo::AllreduceOptions opts(m_impl->context);
    opts.setOutput(values, static_cast<size_t>(n));
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    throw Error(concat("rank ", m_rank, ": all_reduce_sum failed: ", e.what()));
  }
}

void GlooCommunicator::barrier() {
  if (m_world_size == 1)
    return;
  try {
    gloo::BarrierOptions opts(m_impl->context);
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    throw Error(concat("rank ", m_rank, ": barrier failed: ", e.what()));
  }
}

}  // namespace lathe::dist
