// The registry of device communicators (see communicator.h).
#include "engine/exec/communicator.h"

#include <map>
#include <mutex>

namespace lathe {

namespace {

std::mutex g_mutex;
std::map<std::string, DeviceCommunicatorFactory>& registry() {
  static std::map<std::string, DeviceCommunicatorFactory> r;
  return r;
}

}  // namespace

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
