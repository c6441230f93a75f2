// The default all-gather and the registry of device communicators (see communicator.h).
#include "engine/exec/communicator.h"

#include <map>
#include <mutex>
#include <string>

#include "engine/core/error.h"

namespace lathe {

namespace {

std::mutex g_mutex;
std::map<std::string, DeviceCommunicatorFactory>& registry() {
  static std::map<std::string, DeviceCommunicatorFactory> r;
  return r;
}

}  // namespace

void Communicator::all_gather_parameters(const std::vector<NamedParam>& pieces, const std::vector<int>& owners) {
  if (owners.size() != pieces.size())
    throw Error("all_gather_parameters: " + std::to_string(owners.size()) + " owners for " +
                std::to_string(pieces.size()) + " pieces");
  std::vector<std::vector<NamedParam>> by_rank(static_cast<size_t>(world_size()));
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (owners[i] < 0 || owners[i] >= world_size())
      throw Error("all_gather_parameters: " + pieces[i].name + " is owned by rank " + std::to_string(owners[i]) +
                  ", not a rank of " + std::to_string(world_size()));
    by_rank[static_cast<size_t>(owners[i])].push_back(pieces[i]);
  }
  for (int r = 0; r < world_size(); ++r)
    if (!by_rank[static_cast<size_t>(r)].empty())
      broadcast_parameters(by_rank[static_cast<size_t>(r)], r);
}

void register_device_communicator(const std::string& backend, DeviceCommunicatorFactory factory) {
  std::lock_guard lock(g_mutex);
  registry()[backend] = std::move(factory);
}

std::shared_ptr<Communicator> communicator_for_backend(const std::string& backend, std::shared_ptr<Communicator> host) {
  DeviceCommunicatorFactory factory;
  {
    std::lock_guard lock(g_mutex);
    if (auto it = registry().find(backend); it != registry().end())
      factory = it->second;
  }
  return factory ? factory(std::move(host)) : host;
}

}  // namespace lathe
