// Rendezvous on Gloo's own stores: a FileStore folder (one machine, or a shared file system) or
// Gloo's RedisStore ("redis://host:port", across machines), with every key under a per-run prefix
// so two runs sharing a folder or server never meet, and a join step that, when ranks do not all
// arrive within the timeout, names the store and the missing ranks (Gloo's own wait says neither).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace lathe::dist {

/// An opened store and how to name it in messages ("file store /tmp/x", "redis store host:6379").
struct OpenedStore {
  std::unique_ptr<gloo::rendezvous::Store> store;
  std::string description;
};

/// `spec` is "redis://host:port" or a folder (created when missing). Throws ConfigError for a
/// malformed redis address, lathe::Error when the store cannot be opened.
OpenedStore open_store(const std::string& spec);

/// Every key of `inner` as "<prefix>.<key>" (Gloo's PrefixStore joins with '/', which a FileStore
/// would read as a sub-folder).
class PrefixedStore final : public gloo::rendezvous::Store {
 public:
  PrefixedStore(std::string prefix, gloo::rendezvous::Store& inner) : m_prefix(std::move(prefix)), m_inner(inner) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  /// True when `key` is present now (a wait of about a millisecond).
  bool has(const std::string& key);

 private:
  std::string m_prefix;
  gloo::rendezvous::Store& m_inner;
  std::string full(const std::string& key) const { return m_prefix + "." + key; }
};

/// Announces `rank` and waits until all `world_size` ranks have; throws lathe::Error naming
/// `store_description` and the missing ranks when they have not within `timeout`.
void join_ranks(PrefixedStore& store, const std::string& store_description, int rank, int world_size,
                std::chrono::milliseconds timeout);

}  // namespace lathe::dist
