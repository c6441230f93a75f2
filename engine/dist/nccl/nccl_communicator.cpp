// NcclCommunicator (see nccl_communicator.h).
#include "engine/dist/nccl/nccl_communicator.h"

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/nccl_comm.h"
#include "engine/core/error.h"

namespace lathe::cuda {

namespace {

/// Device tensors first, host tensors after, in the caller's order within each.
struct Split {
  std::vector<NamedParam> host;
  std::vector<Tensor*> device;
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
    s.device.push_back(&t);
  }
  return s;
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::shared_ptr<Communicator> host) : m_host(std::move(host)) {
  LATHE_CHECK(m_host != nullptr, "NcclCommunicator needs the host communicator the ranks joined with");
}

NcclCommunicator::~NcclCommunicator() = default;

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
}

NcclComm& NcclCommunicator::nccl(const char* call) {
  if (!m_nccl)
    throw Error(std::string("NcclCommunicator::") + call +
                " before attach(): the run attaches it to its backend first");
  return *m_nccl;
}

void NcclCommunicator::all_reduce_gradients(const std::vector<NamedParam>& params) {
  m_bytes_last_step = 0;
  // One rank too: NCCL's mean over one rank is the gradient itself, bit for bit (tested).
  const Split s = split_by_place(params, true);
  if (!s.device.empty()) {
    NcclComm& comm = nccl("all_reduce_gradients");
    comm.group_start();
    for (Tensor* g : s.device) {
      comm.all_reduce(g->raw(), static_cast<size_t>(g->numel()), g->dtype(), NcclComm::Op::avg);
      m_bytes_last_step += static_cast<int64_t>(g->nbytes());
    }
    comm.group_end();
  }
  if (!s.host.empty())
    m_host->all_reduce_gradients(s.host);
}

void NcclCommunicator::broadcast_parameters(const std::vector<NamedParam>& params, int root) {
  const Split s = split_by_place(params, false);
  if (!s.device.empty()) {
    NcclComm& comm = nccl("broadcast_parameters");
    comm.group_start();
    for (Tensor* v : s.device)
      comm.broadcast(v->raw(), static_cast<size_t>(v->numel()), v->dtype(), root);
    comm.group_end();
  }
  if (!s.host.empty())
    m_host->broadcast_parameters(s.host, root);
}

void register_nccl_communicator() {
  register_device_communicator(
      "cuda", [](std::shared_ptr<Communicator> host) { return std::make_shared<NcclCommunicator>(std::move(host)); });
}

}  // namespace lathe::cuda
