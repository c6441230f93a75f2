// GlooCommunicator over Gloo's tcp transport (see gloo_communicator.h).
#include "engine/dist/gloo_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include "engine/core/dtype.h"
#include "engine/core/error.h"
#include "engine/core/half_arrays.h"
#include "engine/dist/grad_buckets.h"
#include "engine/dist/rendezvous.h"
#include "engine/dist/shm_allreduce.h"
#include "engine/dist/shm_grad_arena.h"

namespace lathe::dist {

using detail::concat;

namespace {

// One bucket of the overlap plan: pieces (gradient index, offset, count) of the reverse-order stream.
using Piece = BucketPiece;
struct PlannedBucket {
  std::vector<Piece> pieces;
  int64_t elements = 0;
  int waiting_for = 0;  // gradients in it not yet ready (reset each step)
  std::vector<float> data;
  std::vector<uint16_t> wire;
};

using Grads = std::vector<std::pair<float*, int64_t>>;  // (pointer, elements), last parameter first

// The shared-memory segment's payload for a compression setting.
ShmAllReduce::Format shm_format(GlooOptions::Compression c) {
  switch (c) {
    case GlooOptions::Compression::fp16:
      return ShmAllReduce::Format::fp16;
    case GlooOptions::Compression::bf16:
      return ShmAllReduce::Format::bf16;
    case GlooOptions::Compression::none:
      break;
  }
  return ShmAllReduce::Format::f32;
}

// Where the gradients lie in every rank's region of the gradient arena (ShmGradArena), when the
// communicator placed them there.
struct ArenaPlace {
  ShmGradArena* arena = nullptr;
  const std::vector<int64_t>* offsets = nullptr;  // per gradient of the stream
};

// Values to sum over the ranks in the same synchronisation as a step's last gradient bucket
// (all_reduce_gradients_and_sum); `taken` once they have gone that way.
struct Ride {
  double* values = nullptr;
  int64_t n = 0;
  bool taken = false;
};

// Averages one bucket's pieces over the ranks, in place in the gradients: in the gradient arena
// where they lie (a piece found elsewhere is copied to its place and back), else through the
// shared-memory slots straight from and back into them (the mean computed there, in `format`), else
// copied into `bucket`, summed by tcp_sum(bucket, elements) and divided on the way back.
// With `ride`, its values go with the arena's mean (and are then taken); other paths leave them.
template <class TcpSum>
void average_bucket(const std::vector<Piece>& pieces, const Grads& grads, ShmAllReduce* shm,
                    ShmAllReduce::Format format, const ArenaPlace& place, float* bucket, float divisor,
                    TcpSum tcp_sum, Ride* ride = nullptr) {
  if (shm && place.arena) {
    std::vector<ShmAllReduce::Region> regions;
    std::vector<ShmAllReduce::Span> moved;  // pieces found elsewhere, and their places
    std::vector<float*> places;
    for (const Piece& pc : pieces) {
      const int64_t at = (*place.offsets)[pc.grad] + pc.offset;
      regions.push_back({at, pc.count});
      float* src = grads[pc.grad].first + pc.offset;
      float* dst = place.arena->mine() + at;
      if (src != dst) {
        std::memcpy(dst, src, pc.count * sizeof(float));
        moved.push_back({src, pc.count});
        places.push_back(dst);
      }
    }
    const bool riding = ride && ride->values && ride->n <= ShmAllReduce::kSmallValues;
    shm->all_reduce_mean_mapped(place.arena->base(), place.arena->stride(), regions, divisor,
                                riding ? ride->values : nullptr, riding ? ride->n : 0);
    if (riding)
      ride->taken = true;
    for (size_t k = 0; k < moved.size(); ++k)
      std::memcpy(moved[k].data, places[k], moved[k].n * sizeof(float));
    return;
  }
  if (shm) {
    std::vector<ShmAllReduce::Span> spans;
    for (const Piece& pc : pieces)
      spans.push_back({grads[pc.grad].first + pc.offset, pc.count});
    shm->all_reduce_mean(spans, divisor, format);
    return;
  }
  int64_t filled = 0;
  for (const Piece& pc : pieces) {
    std::memcpy(bucket + filled, grads[pc.grad].first + pc.offset, pc.count * sizeof(float));
    filled += pc.count;
  }
  tcp_sum(bucket, filled);
  const float* src = bucket;
  for (const Piece& pc : pieces) {
    float* dst = grads[pc.grad].first + pc.offset;
    for (int64_t i = 0; i < pc.count; ++i)
      dst[i] = src[i] / divisor;
    src += pc.count;
  }
}

}  // namespace

struct GlooCommunicator::Impl {
  OpenedStore opened;
  std::unique_ptr<PrefixedStore> store;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::chrono::milliseconds timeout{0};
  int64_t broadcasts = 0;             // broadcast_bytes calls so far: each one's store key is new
  std::unique_ptr<ShmAllReduce> shm;  // ranks on one machine: gradients, votes and sums, broadcasts
  std::string shm_name;               // its name (the gradient arenas' names derive from it)
  // The gradient arena of the current plan (f32 through shared memory): every rank's gradients in
  // one segment, each at arena_offsets[i] of its rank's region (i in the stream's order), for
  // gradients of arena_sizes; kept mapped while the plan lasts, so that no new allocation can take
  // its addresses.
  std::shared_ptr<ShmGradArena> arena;
  std::vector<int64_t> arena_offsets, arena_sizes;
  int arenas = 0;  // opened so far: each one's name and token are new
  Ride ride;       // all_reduce_gradients_and_sum's values, for the step's last bucket

  // --- overlap: the plan for one parameter list, and the communication thread.
  std::vector<const Param*> plan_params;  // in the caller's order
  Grads grads;                            // reverse order, as the stream
  std::unordered_map<const Param*, std::vector<int>> buckets_of;
  std::unordered_map<const Param*, char> seen;  // ready this step
  std::vector<PlannedBucket> buckets;
  std::mutex mutex;
  std::condition_variable cv;
  size_t next = 0;     // next bucket the thread reduces
  size_t started = 0;  // buckets the thread has begun this step
  bool stop = false;
  std::exception_ptr error;
  std::thread thread;
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

// The parameters' values as shared-memory spans (host f32, dense: checked).
std::vector<ShmAllReduce::Span> spans_of(const std::vector<NamedParam>& params) {
  std::vector<ShmAllReduce::Span> spans;
  for (const auto& p : params)
    spans.push_back({host_f32(p.param->value, "parameter " + p.name), p.param->value.numel()});
  return spans;
}

// Sums of 16-bit wire values, computed in f32 and rounded back (Gloo calls it on each ring hop).
void sum_f16(void* c, const void* a, const void* b, size_t n) {
  f16_sum_array(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), static_cast<uint16_t*>(c),
                static_cast<int64_t>(n));
}
void sum_bf16(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i)
    out[i] = f32_to_bf16(bf16_to_f32(x[i]) + bf16_to_f32(y[i]));
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
  m_compression = options.compression;
  m_bucket_elements = std::max<int64_t>(1, static_cast<int64_t>(options.bucket_mb * 1024 * 1024 / sizeof(float)));
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(options.timeout_s * 1000)));

  m_impl->opened = open_store(options.rendezvous);
  m_impl->store = std::make_unique<PrefixedStore>(options.run_id, *m_impl->opened.store);
  const std::string& where = m_impl->opened.description;
  m_impl->timeout = timeout;
  join_ranks(*m_impl->store, where, rank, world_size, timeout);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.host;
    m_impl->device = gloo::transport::tcp::CreateDevice(attr);
    m_impl->context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
    m_impl->context->setTimeout(timeout);
    m_impl->context->connectFullMesh(*m_impl->store, m_impl->device);
    // connectFullMesh may return on one rank while a peer is still handshaking with it; a rank
    // that then exits at once (an error before any collective) broke the peer's connect. A barrier
    // makes "constructed" mean "every rank is connected".
    gloo::BarrierOptions ready(m_impl->context);
    gloo::barrier(ready);
  } catch (const std::exception& e) {
    throw Error(concat("rank ", rank, " of ", world_size, ": connecting through the ", where, " on ", options.host,
                       " failed: ", e.what()));
  }
  if (world_size > 1 && options.shared_memory)
    open_shared_memory(options.run_id);
}

namespace {

/// A POSIX shared-memory name from the run id and rank 0's pid (only [A-Za-z0-9._-] kept).
std::string shm_name(const std::string& run_id) {
  std::string name = "/lathe-";
  for (char c : run_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return name.substr(0, 200) + "-" + std::to_string(getpid());
}

}  // namespace

void GlooCommunicator::open_shared_memory(const std::string& run_id) {
  // Rank 0 creates the segment and stamps it with a token; a rank that maps it and reads the same
  // token shares this machine's memory with rank 0. Only when every rank does is it used; rank 0
  // then removes the name (the memory lives while mapped), so nothing stays in /dev/shm.
  const int64_t chunk = std::min(m_bucket_elements, kSharedMemoryChunk);
  std::string offer;  // "name token", or "" when rank 0 could not create it
  uint64_t token = 0;
  if (m_rank == 0) {
    try {
      offer = shm_name(run_id);
      ShmAllReduce::create(offer, m_world_size, chunk);
      token = (static_cast<uint64_t>(getpid()) << 32) ^
              static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      offer.append(1, ' ').append(std::to_string(token));
    } catch (const std::exception&) {
      offer.clear();  // /dev/shm too small or missing: tcp it is
    }
  }
  broadcast_bytes(offer, 0);
  double mapped = 0;
  if (!offer.empty()) {
    const std::string name = offer.substr(0, offer.find(' '));
    token = std::stoull(offer.substr(offer.find(' ') + 1));
    try {
      m_impl->shm = std::make_unique<ShmAllReduce>(name, m_rank, m_world_size, chunk, m_impl->timeout);
      if (m_rank == 0)
        m_impl->shm->set_token(token);
    } catch (const std::exception&) {
      m_impl->shm.reset();
    }
  }
  // Over tcp until every rank is known to have the segment (one without it would wait elsewhere):
  // barrier() is Gloo's; all_reduce_sum() would take the segment where this rank has it.
  barrier();  // rank 0's token is written before anyone reads it
  if (m_impl->shm && m_impl->shm->token() == token)
    mapped = 1;
  tcp_all_reduce_sum(&mapped, 1);
  if (m_rank == 0 && !offer.empty())
    ShmAllReduce::unlink(offer.substr(0, offer.find(' ')));
  if (mapped < m_world_size) {
    m_impl->shm.reset();
  } else {
    m_impl->shm->watch_peers();  // every rank wrote its pid before the barrier
    m_impl->shm_name = offer.substr(0, offer.find(' '));
  }
}

bool GlooCommunicator::open_grad_arena(const std::vector<int64_t>& sizes) {
  // Collective (every rank plans the same gradients at the same step). Like the slots' segment:
  // rank 0 creates it and stamps a token, the others map it and check the token, and only when
  // every rank has it is it used; rank 0 then removes the name.
  Impl& im = *m_impl;
  im.arena.reset();
  im.arena_offsets.clear();
  im.arena_sizes.clear();
  const ShmGradArena::Layout layout = ShmGradArena::layout(sizes);
  const double bytes = static_cast<double>(layout.region_elements) * sizeof(float) * m_world_size;
  if (!im.shm || m_compression != GlooOptions::Compression::none || sizes.empty() || bytes > kGradArenaMaxBytes)
    return false;
  const int serial = ++im.arenas;
  const std::string name = im.shm_name + "-g" + std::to_string(serial);
  const uint64_t token = im.shm->token() ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(serial));
  std::shared_ptr<ShmGradArena> arena;
  double created = 0;
  if (m_rank == 0) {
    try {
      ShmGradArena::create(name, m_world_size, layout.region_elements);
      arena = std::make_shared<ShmGradArena>(name, 0, m_world_size, layout.region_elements);
      arena->set_token(token);
      created = 1;
    } catch (const std::exception&) {
      arena.reset();  // /dev/shm too small: the slots it is
      ShmGradArena::unlink(name);
    }
  }
  double mapped = 0;
  try {
    all_reduce_sum(&created, 1);  // rank 0's token is written before anyone reads it
    if (created > 0) {
      try {
        if (m_rank != 0)
          arena = std::make_shared<ShmGradArena>(name, m_rank, m_world_size, layout.region_elements);
        if (arena->token() == token)
          mapped = 1;
      } catch (const std::exception&) {
        arena.reset();
      }
      all_reduce_sum(&mapped, 1);
    }
  } catch (...) {  // a peer gone: its error, and no name left behind
    if (m_rank == 0)
      ShmGradArena::unlink(name);
    throw;
  }
  if (m_rank == 0 && created > 0)
    ShmGradArena::unlink(name);
  if (created == 0 || mapped < m_world_size)
    return false;
  im.arena = std::move(arena);
  im.arena_offsets = layout.offsets;
  im.arena_sizes = sizes;
  return true;
}

bool GlooCommunicator::uses_shared_memory() const { return m_impl->shm != nullptr; }

bool GlooCommunicator::uses_gradient_arena() const { return m_impl->arena != nullptr; }

GlooCommunicator::~GlooCommunicator() {
  if (m_impl && m_impl->thread.joinable()) {
    {
      std::lock_guard lock(m_impl->mutex);
      m_impl->stop = true;
    }
    m_impl->cv.notify_all();
    m_impl->thread.join();
  }
}

const std::string& GlooCommunicator::store_description() const { return m_impl->opened.description; }

void GlooCommunicator::reduce_bucket(float* data, uint16_t* wire, int64_t filled) {
  try {
    gloo::AllreduceOptions opts(m_impl->context);
    using Fn = void (*)(void*, const void*, const void*, size_t);
    if (m_compression == GlooOptions::Compression::none) {
      opts.setOutput(data, static_cast<size_t>(filled));
      opts.setReduceFunction(static_cast<Fn>(&gloo::sum<float>));
      gloo::allreduce(opts);
    } else {
      const bool f16 = m_compression == GlooOptions::Compression::fp16;
      if (f16)
        f32_to_f16_array(data, wire, filled);
      else
        for (int64_t i = 0; i < filled; ++i)
          wire[i] = f32_to_bf16(data[i]);
      opts.setOutput(wire, static_cast<size_t>(filled));
      opts.setReduceFunction(static_cast<Fn>(f16 ? &sum_f16 : &sum_bf16));
      gloo::allreduce(opts);
      if (f16)
        f16_to_f32_array(wire, data, filled);
      else
        for (int64_t i = 0; i < filled; ++i)
          data[i] = bf16_to_f32(wire[i]);
    }
  } catch (const std::exception& e) {
    throw Error(concat("rank ", m_rank, ": gradient all-reduce failed: ", e.what()));
  }
}

namespace {

Grads reverse_grads(const std::vector<NamedParam>& params) {
  Grads grads;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const Tensor& g = it->param->grad;
    if (!g.defined())
      continue;  // a frozen parameter: the same on every rank (one model)
    grads.emplace_back(host_f32(g, "the gradient of " + it->name), g.numel());
  }
  return grads;
}

std::vector<int64_t> sizes_of(const Grads& grads) {
  std::vector<int64_t> sizes;
  for (const auto& g : grads)
    sizes.push_back(g.second);
  return sizes;
}

}  // namespace

void GlooCommunicator::all_reduce_gradients(const std::vector<NamedParam>& params) {
  m_last_buckets = 0;
  m_started_early = 0;
  m_bytes_last_step = 0;
  if (m_world_size == 1)
    return;
  const int64_t wire_bytes = m_compression == GlooOptions::Compression::none ? 4 : 2;
  Impl& im = *m_impl;
  bool planned = im.thread.joinable() && im.plan_params.size() == params.size();
  for (size_t i = 0; planned && i < params.size(); ++i)
    planned = im.plan_params[i] == params[i].param;
  if (planned)
    planned = reverse_grads(params) == im.grads;  // the same gradient buffers (none swapped in)
  if (planned) {
    // Overlap: every gradient is ready now; wait for the thread to finish the buckets in flight.
    std::unique_lock lock(im.mutex);
    m_started_early = static_cast<int>(im.started);
    for (auto& [p, buckets] : im.buckets_of)
      if (!im.seen[p]) {
        im.seen[p] = 1;
        for (int b : buckets)
          --im.buckets[b].waiting_for;
      }
    im.cv.notify_all();
    // The thread sends every bucket but the last, which holds the first gradients the backward pass
    // computes, so is ready only when it ends: it goes from here, with no hand-over to the thread
    // and back.
    if (!im.buckets.empty()) {
      const size_t last = im.buckets.size() - 1;
      im.cv.wait(lock, [&] { return im.next == last || im.error; });
      if (!im.error) {
        lock.unlock();
        try {
          PlannedBucket& b = im.buckets[last];
          average_bucket(b.pieces, im.grads, im.shm.get(), shm_format(m_compression),
                         ArenaPlace{im.arena.get(), &im.arena_offsets}, b.data.data(), static_cast<float>(m_world_size),
                         [&](float* data, int64_t n) { reduce_bucket(data, b.wire.data(), n); }, &im.ride);
          lock.lock();
        } catch (...) {
          lock.lock();
          im.error = std::current_exception();
        }
        ++im.next;
      }
    }
    // Reset for the next step.
    for (auto& b : im.buckets)
      b.waiting_for = 0;
    for (auto& [p, buckets] : im.buckets_of) {
      im.seen[p] = 0;
      for (int b : buckets)
        ++im.buckets[b].waiting_for;
    }
    im.next = im.started = 0;
    m_last_buckets = static_cast<int>(im.buckets.size());
    for (const auto& b : im.buckets)
      m_bytes_last_step += b.elements * wire_bytes;
    if (im.error) {
      auto e = im.error;
      im.error = nullptr;
      std::rethrow_exception(e);
    }
    return;
  }
  const auto grads = reverse_grads(params);
  if (!im.shm)
    m_bucket.resize(static_cast<size_t>(m_bucket_elements));
  if (!im.shm && m_compression != GlooOptions::Compression::none)
    m_bucket16.resize(static_cast<size_t>(m_bucket_elements));
  const float divisor = static_cast<float>(m_world_size);
  // Gradients of the arena's sizes (the same on every rank, one model) take the arena's protocol,
  // copied to their places and back where they are elsewhere, so that every rank takes the same.
  const std::vector<int64_t> sizes = sizes_of(grads);
  const ArenaPlace place = sizes == im.arena_sizes ? ArenaPlace{im.arena.get(), &im.arena_offsets} : ArenaPlace{};
  // The gradients as one stream cut into buckets: a bucket may hold many parameters, or part of one.
  const std::vector<GradBucket> buckets = plan_grad_buckets(sizes, m_bucket_elements).buckets;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const GradBucket& b = buckets[i];
    ++m_last_buckets;
    m_bytes_last_step += b.elements * wire_bytes;
    average_bucket(b.pieces, grads, im.shm.get(), shm_format(m_compression), place, m_bucket.data(), divisor,
                   [&](float* data, int64_t n) { reduce_bucket(data, m_bucket16.data(), n); },
                   i + 1 == buckets.size() ? &im.ride : nullptr);
  }
}

void GlooCommunicator::all_reduce_gradients_and_sum(const std::vector<NamedParam>& params, double* values, int64_t n) {
  if (m_world_size == 1 || n == 0) {
    all_reduce_gradients(params);
    return;
  }
  // Every rank takes the same path for its last bucket (the arena's protocol or not: decided by what
  // every rank planned alike), so the values ride on it on every rank or on none.
  Ride& ride = m_impl->ride;
  ride = Ride{values, n, false};
  try {
    all_reduce_gradients(params);
  } catch (...) {
    ride = Ride{};
    throw;
  }
  const bool taken = ride.taken;
  ride = Ride{};
  if (!taken)
    all_reduce_sum(values, n);
}

std::function<void(const Param*)> GlooCommunicator::grad_ready_hook(const std::vector<NamedParam>& params) {
  if (m_world_size == 1)
    return {};
  Impl& im = *m_impl;
  {
    std::lock_guard lock(im.mutex);
    if (im.next != 0 || im.started != 0)
      throw Error("GlooCommunicator: grad_ready_hook called while a step's buckets are in flight");
  }
  bool same = im.thread.joinable() && im.plan_params.size() == params.size();
  for (size_t i = 0; same && i < params.size(); ++i)
    same = im.plan_params[i] == params[i].param;
  if (same && reverse_grads(params) == im.grads)
    return make_ready_hook();
  // The plan: the same bucket cut as the blocking path, one buffer per bucket.
  im.plan_params.clear();
  for (const auto& p : params)
    im.plan_params.push_back(p.param);
  im.grads = reverse_grads(params);
  im.buckets.clear();
  im.buckets_of.clear();
  im.seen.clear();
  std::vector<Param*> owner;  // of grads[i]
  for (auto it = params.rbegin(); it != params.rend(); ++it)
    if (it->param->grad.defined())
      owner.push_back(it->param);
  // Through shared memory in f32, the gradients move into the arena (values kept), where the
  // backward pass then writes them and the all-reduce finds them.
  if (open_grad_arena(sizes_of(im.grads))) {
    const ShmGradArena& arena = *im.arena;
    for (size_t gi = 0; gi < owner.size(); ++gi) {
      Tensor& grad = owner[gi]->grad;
      Tensor placed = Tensor::over(arena.mine() + im.arena_offsets[gi], grad, arena.owner());
      std::memcpy(placed.raw(), grad.raw(), grad.nbytes());
      grad = std::move(placed);
    }
    im.grads = reverse_grads(params);
  }
  BucketPlan plan = plan_grad_buckets(sizes_of(im.grads), m_bucket_elements);
  for (size_t gi = 0; gi < owner.size(); ++gi)
    im.buckets_of[owner[gi]] = std::move(plan.buckets_of[gi]);
  for (GradBucket& planned : plan.buckets) {
    PlannedBucket b;
    b.pieces = std::move(planned.pieces);
    b.elements = planned.elements;
    b.waiting_for = planned.gradients;
    if (!im.shm) {  // shared memory reduces the gradients in place
      b.data.resize(static_cast<size_t>(b.elements));
      if (m_compression != GlooOptions::Compression::none)
        b.wire.resize(static_cast<size_t>(b.elements));
    }
    im.buckets.push_back(std::move(b));
  }
  for (const auto& [p, list] : im.buckets_of)
    im.seen[p] = 0;
  if (!im.thread.joinable()) {
    im.thread = std::thread([this] {
      Impl& s = *m_impl;
      const float divisor = static_cast<float>(m_world_size);
      std::unique_lock lock(s.mutex);
      for (;;) {
        s.cv.wait(lock, [&] {  // every bucket but the last (all_reduce_gradients sends that one)
          return s.stop || (!s.error && s.next + 1 < s.buckets.size() && s.buckets[s.next].waiting_for == 0);
        });
        if (s.stop)
          return;
        PlannedBucket& b = s.buckets[s.next];
        ++s.started;
        lock.unlock();
        try {
          average_bucket(b.pieces, s.grads, s.shm.get(), shm_format(m_compression),
                         ArenaPlace{s.arena.get(), &s.arena_offsets}, b.data.data(), divisor,
                         [&](float* data, int64_t n) { reduce_bucket(data, b.wire.data(), n); });
          lock.lock();
        } catch (...) {
          lock.lock();
          s.error = std::current_exception();
        }
        ++s.next;
        s.cv.notify_all();
      }
    });
  }
  return make_ready_hook();
}

std::function<void(const Param*)> GlooCommunicator::make_ready_hook() {
  Impl& im = *m_impl;
  return [&im](const Param* p) {
    std::lock_guard lock(im.mutex);
    auto it = im.buckets_of.find(p);
    if (it == im.buckets_of.end() || im.seen[p])
      return;
    im.seen[p] = 1;
    for (int b : it->second)
      if (--im.buckets[b].waiting_for == 0)
        im.cv.notify_all();
  };
}

void GlooCommunicator::broadcast_parameters(const std::vector<NamedParam>& params, int root) {
  if (root < 0 || root >= m_world_size)
    throw Error(concat("GlooCommunicator: broadcast root ", root, " is not a rank of ", m_world_size));
  if (m_world_size == 1)
    return;
  if (m_impl->shm) {  // ranks on this machine: one copy through the segment for the whole list
    m_impl->shm->broadcast(spans_of(params), root);
    return;
  }
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

void GlooCommunicator::all_gather_parameters(const std::vector<NamedParam>& pieces, const std::vector<int>& owners) {
  if (!m_impl->shm || owners.size() != pieces.size()) {
    Communicator::all_gather_parameters(pieces, owners);  // tcp broadcasts (and the size check)
    return;
  }
  // One copy through the segment: each owner's slices in, every other rank's out, bit for bit.
  for (size_t i = 0; i < pieces.size(); ++i)  // refused naming the piece, as the tcp path does
    if (owners[i] < 0 || owners[i] >= m_world_size)
      throw Error(concat("GlooCommunicator: ", pieces[i].name, " is owned by rank ", owners[i], ", not a rank of ",
                         m_world_size));
  m_impl->shm->gather(spans_of(pieces), owners);
}

void GlooCommunicator::all_reduce_sum(double* values, int64_t n) {
  if (m_world_size == 1 || n == 0)
    return;
  if (m_impl->shm) {  // ranks on this machine: no tcp message, no wake-up of Gloo's event-loop thread
    m_impl->shm->all_reduce_sum(values, n);
    return;
  }
  tcp_all_reduce_sum(values, n);
}

void GlooCommunicator::tcp_all_reduce_sum(double* values, int64_t n) {
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

void GlooCommunicator::broadcast_bytes(std::string& bytes, int root) {
  if (root < 0 || root >= m_world_size)
    throw Error(concat("broadcast_bytes: root ", root, " is not a rank of ", m_world_size));
  const std::string key = concat("bytes.", m_impl->broadcasts++);
  if (m_world_size == 1)
    return;
  // Through the rendezvous store, as the NCCL unique id travels in PyTorch: the root writes a key
  // the others wait for (each call its own key, so a late reader never sees the next message).
  try {
    if (m_rank == root) {
      m_impl->store->set(key, std::vector<char>(bytes.begin(), bytes.end()));
    } else {
      m_impl->store->wait({key}, m_impl->timeout);
      const std::vector<char> got = m_impl->store->get(key);
      bytes.assign(got.begin(), got.end());
    }
  } catch (const std::exception& e) {
    throw Error(concat("rank ", m_rank, ": waiting for rank ", root, "'s message '", key, "' in the ",
                       m_impl->opened.description, " failed: ", e.what()));
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
