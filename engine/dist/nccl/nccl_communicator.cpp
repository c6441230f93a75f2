// NcclCommunicator (see nccl_communicator.h).
#include "engine/dist/nccl/nccl_communicator.h"

#include <algorithm>
#include <unordered_map>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_scope.h"
#include "engine/backend/cuda/nccl_comm.h"
#include "engine/core/error.h"
#include "engine/dist/grad_buckets.h"

namespace lathe::cuda {

namespace {

/// Device tensors first, host tensors after, in the caller's order within each.
struct Split {
  std::vector<NamedParam> host;
  std::vector<std::pair<const Param*, Tensor*>> device;
};

/// Checked before any NCCL call, so an error never leaves an NCCL group open.
Split split_by_place(const std::vector<NamedParam>& params, bool grads) {
  Split s;
  for (const NamedParam& p : params) {
    Tensor& t = grads ? p.param->grad : p.param->value;
    if (!t.defined())
      continue;  // a frozen parameter's gradient: the same on every rank
    if (t.device().is_cpu()) {
      s.host.push_back(p);
      continue;
    }
    if (!t.is_dense())
      throw Error("NcclCommunicator: " + std::string(grads ? "the gradient of " : "") + p.name +
                  " is not dense in memory");
    s.device.emplace_back(p.param, &t);
  }
  return s;
}

/// One device gradient as the overlap plan knows it: a buffer swapped or re-allocated between
/// steps no longer matches, and the plan is made again.
struct DeviceGrad {
  const Param* param;
  void* data;
  int64_t numel;
  DType dtype;
  bool operator==(const DeviceGrad& o) const {
    return param == o.param && data == o.data && numel == o.numel && dtype == o.dtype;
  }
};

/// The device gradients, last parameter first (the order the backward pass finishes them).
std::vector<DeviceGrad> reverse_device_grads(const Split& s) {
  std::vector<DeviceGrad> grads;
  for (auto it = s.device.rbegin(); it != s.device.rend(); ++it)
    grads.push_back({it->first, it->second->raw(), it->second->numel(), it->second->dtype()});
  return grads;
}

}  // namespace

/// The communication stream, its two events, the bucket plan and one step's progress.
struct NcclCommunicator::Overlap {
  int device = 0;
  cudaStream_t compute = nullptr;      // the backend's stream (not owned)
  cudaStream_t stream = nullptr;       // communication stream (owned, non-blocking)
  cudaEvent_t compute_done = nullptr;  // recorded on `compute`, waited for by `stream`
  cudaEvent_t comm_done = nullptr;     // recorded on `stream`, waited for by `compute`
  // The plan, for one parameter list and its gradient buffers.
  std::vector<const Param*> params;                // the caller's list, in its order
  std::vector<DeviceGrad> grads;                   // last parameter first
  std::unordered_map<const Param*, size_t> index;  // into grads
  dist::BucketPlan plan;
  // One step.
  std::vector<char> seen;    // per gradient: final this step
  std::vector<int> waiting;  // per bucket: gradients in it not final yet
  size_t next = 0;           // first bucket not enqueued yet
  bool armed = false;        // a hook was handed out; its all_reduce_gradients has not come
  bool pending = false;      // `stream` has work `compute` has not been made to wait for
  // dist/comm_s: events (timing on) on `compute` where a step's backward pass has been enqueued and
  // after the step's collectives (or the wait for them); their gap is what the backward pass did not
  // hide. Read at the next step, when the host's read of the next loss has already waited for them.
  cudaEvent_t step_begin = nullptr;
  cudaEvent_t step_end = nullptr;
  bool step_timed = false;  // both recorded for the last step, not read yet
  double exposed_s = -1;    // the last step read

  ~Overlap() {
    (void)cudaSetDevice(device);
    if (stream)
      (void)cudaStreamSynchronize(stream);
    if (compute_done)
      (void)cudaEventDestroy(compute_done);
    if (comm_done)
      (void)cudaEventDestroy(comm_done);
    if (step_begin)
      (void)cudaEventDestroy(step_begin);
    if (step_end)
      (void)cudaEventDestroy(step_end);
    if (stream)
      (void)cudaStreamDestroy(stream);
  }

  bool matches(const std::vector<NamedParam>& list, const std::vector<DeviceGrad>& device_grads) const {
    if (list.size() != params.size() || device_grads != grads)
      return false;
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].param != params[i])
        return false;
    return true;
  }
};

NcclCommunicator::NcclCommunicator(std::shared_ptr<Communicator> host, int64_t bucket_bytes) : m_host(std::move(host)) {
  LATHE_CHECK(m_host != nullptr, "NcclCommunicator needs the host communicator the ranks joined with");
  LATHE_CHECK(bucket_bytes >= 0, "NcclCommunicator: bucket size ", bucket_bytes, " bytes (0 = compute.bucket_mb)");
  m_bucket_bytes = bucket_bytes > 0 ? bucket_bytes : m_host->bucket_bytes();
  if (m_bucket_bytes <= 0)
    m_bucket_bytes = int64_t{25} << 20;
}

NcclCommunicator::~NcclCommunicator() {
  // The communication stream's collectives finish before NCCL's communicator goes, the stream after.
  if (m_overlap && m_overlap->stream) {
    (void)cudaSetDevice(m_device);
    (void)cudaStreamSynchronize(m_overlap->stream);
  }
  m_nccl.reset();
  m_overlap.reset();
}

void NcclCommunicator::attach(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (!cuda)
    throw Error("NcclCommunicator: the run's backend is " + backend.name() +
                ", not cuda: NCCL ranks train on GPUs (CPU ranks use Gloo)");
  LATHE_CHECK(!m_nccl, "NcclCommunicator: attach() was called twice");
  // Every rank alive before NCCL's join, which has no timeout of its own: a rank that failed in
  // its set-up shows here as the host barrier's error, not as a hang.
  m_host->barrier();
  std::string id = rank() == 0 ? make_nccl_unique_id().to_string() : std::string();
  m_host->broadcast_bytes(id, 0);
  m_device = backend.device().index;
  m_nccl = std::make_unique<NcclComm>(NcclUniqueId::from_string(id), world_size(), rank(), m_device, cuda->stream());
  auto overlap = std::make_unique<Overlap>();
  overlap->device = m_device;
  overlap->compute = cuda->stream();
  const DeviceScope scope(m_device);
  LATHE_CUDA_CHECK(cudaStreamCreateWithFlags(&overlap->stream, cudaStreamNonBlocking));
  LATHE_CUDA_CHECK(cudaEventCreateWithFlags(&overlap->compute_done, cudaEventDisableTiming));
  LATHE_CUDA_CHECK(cudaEventCreateWithFlags(&overlap->comm_done, cudaEventDisableTiming));
  LATHE_CUDA_CHECK(cudaEventCreate(&overlap->step_begin));
  LATHE_CUDA_CHECK(cudaEventCreate(&overlap->step_end));
  m_overlap = std::move(overlap);
}

NcclComm& NcclCommunicator::nccl(const char* call) {
  if (!m_nccl)
    throw Error(std::string("NcclCommunicator::") + call +
                " before attach(): the run attaches it to its backend first");
  return *m_nccl;
}

std::function<void(const Param*)> NcclCommunicator::grad_ready_hook(const std::vector<NamedParam>& params) {
  (void)nccl("grad_ready_hook");
  Overlap& o = *m_overlap;
  // A step whose all_reduce_gradients never came (an error in its backward pass): its buckets finish
  // before the compute stream touches those gradients again.
  o.armed = false;
  join_streams();
  const Split s = split_by_place(params, true);
  const std::vector<DeviceGrad> grads = reverse_device_grads(s);
  if (!o.matches(params, grads)) {
    o.params.clear();
    for (const NamedParam& p : params)
      o.params.push_back(p.param);
    o.grads = grads;
    o.index.clear();
    std::vector<int64_t> sizes;
    size_t widest = 1;
    for (size_t i = 0; i < grads.size(); ++i) {
      o.index[grads[i].param] = i;
      sizes.push_back(grads[i].numel);
      widest = std::max(widest, dtype_size(grads[i].dtype));
    }
    o.plan = dist::plan_grad_buckets(sizes, std::max<int64_t>(1, m_bucket_bytes / static_cast<int64_t>(widest)));
  }
  o.seen.assign(o.grads.size(), 0);
  o.waiting.clear();
  for (const dist::GradBucket& b : o.plan.buckets)
    o.waiting.push_back(b.gradients);
  o.next = 0;
  std::function<void(const Param*)> host_hook;
  if (!s.host.empty())
    host_hook = m_host->grad_ready_hook(s.host);
  if (o.grads.empty())
    return host_hook;  // nothing on the device: all_reduce_gradients does it all
  o.armed = true;
  return [this, host_hook](const Param* p) {
    if (host_hook)
      host_hook(p);
    grad_ready(p);
  };
}

void NcclCommunicator::grad_ready(const Param* p) {
  Overlap& o = *m_overlap;
  if (!o.armed)
    return;  // a hook kept past its step
  const auto it = o.index.find(p);
  if (it == o.index.end() || o.seen[it->second])
    return;  // not a device gradient of the plan, or already final
  o.seen[it->second] = 1;
  for (int b : o.plan.buckets_of[it->second])
    --o.waiting[static_cast<size_t>(b)];
  size_t end = o.next;  // buckets go in plan order: the same sequence of collectives on every rank
  while (end < o.waiting.size() && o.waiting[end] == 0)
    ++end;
  issue_buckets(end);
}

void NcclCommunicator::issue_buckets(size_t end) {
  Overlap& o = *m_overlap;
  if (end <= o.next)
    return;
  NcclComm& comm = nccl("all_reduce_gradients");
  const DeviceScope scope(m_device);
  // The communication stream starts after the compute stream's work enqueued so far, which
  // includes the backward ops that wrote these buckets' gradients.
  LATHE_CUDA_CHECK(cudaEventRecord(o.compute_done, o.compute));
  LATHE_CUDA_CHECK(cudaStreamWaitEvent(o.stream, o.compute_done, 0));
  o.pending = true;
  comm.grouped([&] {
    for (size_t b = o.next; b < end; ++b)
      for (const dist::BucketPiece& pc : o.plan.buckets[b].pieces) {
        const DeviceGrad& g = o.grads[pc.grad];
        char* first = static_cast<char*>(g.data) + pc.offset * static_cast<int64_t>(dtype_size(g.dtype));
        comm.all_reduce(first, static_cast<size_t>(pc.count), g.dtype, NcclComm::Op::avg, o.stream);
      }
  });
  if (m_observer)
    for (size_t b = o.next; b < end; ++b) {
      std::vector<std::pair<void*, size_t>> spans;
      for (const dist::BucketPiece& pc : o.plan.buckets[b].pieces) {
        const DeviceGrad& g = o.grads[pc.grad];
        const size_t width = dtype_size(g.dtype);
        spans.emplace_back(static_cast<char*>(g.data) + pc.offset * static_cast<int64_t>(width),
                           static_cast<size_t>(pc.count) * width);
      }
      m_observer(o.stream, spans);
    }
  o.next = end;
}

void NcclCommunicator::join_streams() {
  if (!m_overlap || !m_overlap->pending)
    return;
  Overlap& o = *m_overlap;
  const DeviceScope scope(m_device);
  LATHE_CUDA_CHECK(cudaEventRecord(o.comm_done, o.stream));
  LATHE_CUDA_CHECK(cudaStreamWaitEvent(o.compute, o.comm_done, 0));
  o.pending = false;
}

double NcclCommunicator::exposed_comm_seconds() { return m_overlap ? m_overlap->exposed_s : -1; }

void NcclCommunicator::all_reduce_gradients(const std::vector<NamedParam>& params) {
  if (!m_overlap) {  // before attach(): reduce_gradients names the missing call
    reduce_gradients(params);
    return;
  }
  Overlap& o = *m_overlap;
  const DeviceScope scope(m_device);
  if (o.step_timed) {  // the previous step's, finished on the device by now (see Overlap)
    LATHE_CUDA_CHECK(cudaEventSynchronize(o.step_end));
    float ms = 0;
    LATHE_CUDA_CHECK(cudaEventElapsedTime(&ms, o.step_begin, o.step_end));
    o.exposed_s = std::max(0.0, static_cast<double>(ms) / 1000.0);
    o.step_timed = false;
  }
  LATHE_CUDA_CHECK(cudaEventRecord(o.step_begin, o.compute));
  reduce_gradients(params);
  LATHE_CUDA_CHECK(cudaEventRecord(o.step_end, o.compute));
  o.step_timed = true;
}

void NcclCommunicator::reduce_gradients(const std::vector<NamedParam>& params) {
  m_bytes_last_step = 0;
  m_last_buckets = 0;
  m_started_early = 0;
  // One rank too: NCCL's mean over one rank is the gradient itself, bit for bit (tested).
  const Split s = split_by_place(params, true);
  if (m_overlap && m_overlap->armed) {
    Overlap& o = *m_overlap;
    o.armed = false;
    if (o.matches(params, reverse_device_grads(s))) {
      // Overlapped step: the buckets the hook has not enqueued go now, then the compute stream
      // waits for all of them (the update reads the averages; the next backward rewrites them).
      m_started_early = static_cast<int>(o.next);
      issue_buckets(o.plan.buckets.size());
      join_streams();
      m_last_buckets = static_cast<int>(o.plan.buckets.size());
      for (const DeviceGrad& g : o.grads)
        m_bytes_last_step += g.numel * static_cast<int64_t>(dtype_size(g.dtype));
      if (!s.host.empty())
        m_host->all_reduce_gradients(s.host);
      return;
    }
  }
  // Blocking path (and a step whose gradient buffers changed after its hook was made: the buckets
  // already enqueued finish first, then every gradient is reduced here).
  join_streams();
  if (!s.device.empty()) {
    NcclComm& comm = nccl("all_reduce_gradients");
    comm.grouped([&] {
      for (const auto& d : s.device) {
        const Tensor* g = d.second;
        comm.all_reduce(g->raw(), static_cast<size_t>(g->numel()), g->dtype(), NcclComm::Op::avg);
        m_bytes_last_step += static_cast<int64_t>(g->nbytes());
      }
    });
  }
  if (!s.host.empty())
    m_host->all_reduce_gradients(s.host);
}

void NcclCommunicator::broadcast_parameters(const std::vector<NamedParam>& params, int root) {
  const Split s = split_by_place(params, false);
  if (!s.device.empty()) {
    NcclComm& comm = nccl("broadcast_parameters");
    join_streams();  // a parameter broadcast never races an overlapped step's buckets
    comm.grouped([&] {
      for (const auto& d : s.device)
        comm.broadcast(d.second->raw(), static_cast<size_t>(d.second->numel()), d.second->dtype(), root);
    });
  }
  if (!s.host.empty())
    m_host->broadcast_parameters(s.host, root);
}

void register_nccl_communicator() {
  register_device_communicator(
      "cuda", [](std::shared_ptr<Communicator> host) { return std::make_shared<NcclCommunicator>(std::move(host)); });
}

}  // namespace lathe::cuda
