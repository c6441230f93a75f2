// Gloo stores with a per-run prefix and a join step that names missing ranks (see rendezvous.h).
#include "engine/dist/rendezvous.h"

#include <charconv>
#include <filesystem>
#include <thread>

#define HIREDIS_NESTED_INCLUDE 1
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/redis_store.h>

#include "engine/core/error.h"

namespace lathe::dist {

using detail::concat;

OpenedStore open_store(const std::string& spec) {
  static const std::string kRedis = "redis://";
  OpenedStore out;
  if (spec.rfind(kRedis, 0) == 0) {
    const std::string address = spec.substr(kRedis.size());
    const size_t colon = address.rfind(':');
    std::string host = address;
    int port = 6379;
    if (colon != std::string::npos) {
      host = address.substr(0, colon);
      const std::string port_text = address.substr(colon + 1);
      auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
      if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() || port < 1 ||
          port > 65535)
        throw ConfigError(concat("rendezvous \"", spec, "\": the port \"", port_text,
                                 "\" is not a number in 1..65535 (expected redis://host:port)"));
    }
    if (host.empty())
      throw ConfigError(concat("rendezvous \"", spec, "\" names no host (expected redis://host:port)"));
    out.description = concat("redis store ", host, ":", port);
    try {
      out.store = std::make_unique<gloo::rendezvous::RedisStore>(host, port);
    } catch (const std::exception& e) {
      throw Error(concat("cannot connect to the ", out.description, ": ", e.what()));
    }
    return out;
  }
  if (spec.empty())
    throw ConfigError("rendezvous is empty: give a folder or redis://host:port");
  out.description = concat("file store ", spec);
  try {
    std::filesystem::create_directories(spec);
    out.store = std::make_unique<gloo::rendezvous::FileStore>(spec);
  } catch (const std::exception& e) {
    throw Error(concat("cannot open the ", out.description, ": ", e.what()));
  }
  return out;
}

void PrefixedStore::set(const std::string& key, const std::vector<char>& data) { m_inner.set(full(key), data); }

std::vector<char> PrefixedStore::get(const std::string& key) { return m_inner.get(full(key)); }

void PrefixedStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> joined;
  joined.reserve(keys.size());
  for (const auto& k : keys)
    joined.push_back(full(k));
  m_inner.wait(joined, timeout);
}

bool PrefixedStore::has(const std::string& key) {
  try {
    m_inner.wait({full(key)}, std::chrono::milliseconds(1));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

void join_ranks(PrefixedStore& store, const std::string& store_description, int rank, int world_size,
                std::chrono::milliseconds timeout) {
  auto key = [](int r) { return concat("join.", r); };
  store.set(key(rank), std::vector<char>{'1'});
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    missing.push_back(r);
  while (true) {
    std::vector<int> still;
    for (int r : missing)
      if (!store.has(key(r)))
        still.push_back(r);
    missing = std::move(still);
    if (missing.empty())
      return;
    if (std::chrono::steady_clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string names;
  for (int r : missing)
    names += (names.empty() ? "" : ", ") + std::to_string(r);
  throw Error(concat("rank ", rank, " of ", world_size, ": ranks ", names, " did not join within ",
                     timeout.count() / 1000.0, " s at the ", store_description));
}

}  // namespace lathe::dist
