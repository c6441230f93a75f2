// Thin RAII layer over the SQLite C API: a connection (Db), a prepared statement (Stmt) with bind /
// step / column helpers, and transactions (Txn) that roll back unless committed. Every failure
// throws lathe::Error naming SQLite's message, the statement and file:line (LATHE_SQLITE_CHECK), so
// the store's code reads as straight-line SQL without rc plumbing.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "engine/core/error.h"

namespace lathe::sql {

/// Throws lathe::Error for an SQLite result code that is not OK / ROW / DONE.
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, const char* what, const char* file, int line);

/// True for the "try again later" codes (another connection holds the write lock).
inline bool is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

/// lathe::Error carrying the SQLite result code, so callers can tell "busy" from "broken".
class SqliteError : public Error {
 public:
  SqliteError(const std::string& what, int rc) : Error(what), m_rc(rc) {}
  int code() const { return m_rc; }
  bool busy() const { return is_busy(m_rc); }

 private:
  int m_rc;
};

}  // namespace lathe::sql

/// Evaluates an sqlite3_* call; throws lathe::sql::SqliteError with sqlite3_errmsg(db), the call
/// text and file:line unless it returned SQLITE_OK, SQLITE_ROW or SQLITE_DONE.
#define LATHE_SQLITE_CHECK(db, expr)                                                                        \
  do {                                                                                                      \
    const int lathe_sqlite_rc_ = (expr);                                                                    \
    if (lathe_sqlite_rc_ != SQLITE_OK && lathe_sqlite_rc_ != SQLITE_ROW && lathe_sqlite_rc_ != SQLITE_DONE) \
      ::lathe::sql::throw_sqlite((db), lathe_sqlite_rc_, #expr, __FILE__, __LINE__);                        \
  } while (0)

namespace lathe::sql {

class Stmt;

/// One connection. Not shared between threads: each thread (or process) opens its own.
class Db {
 public:
  /// Opens (creating if needed) `path` read-write with extended result codes and a busy timeout,
  /// so a writer waiting for another writer retries for `busy_timeout_ms` before SQLITE_BUSY.
  /// `read_only`: never creates or writes; a WAL store in a folder this process cannot write is
  /// opened as immutable (nobody can be writing it then: a writer needs its -wal file there).
  explicit Db(const std::string& path, int busy_timeout_ms = 5000, bool read_only = false);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* handle() const { return m_db; }
  const std::string& path() const { return m_path; }

  /// Runs one or more statements that return no rows of interest.
  void exec(const std::string& sql);
  Stmt prepare(std::string_view sql) const;
  /// The value of the first column of the first row (nullopt when there is no row or it is NULL).
  std::optional<int64_t> query_int(std::string_view sql) const;
  std::optional<std::string> query_text(std::string_view sql) const;
  int64_t changes() const { return sqlite3_changes64(m_db); }
  int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(m_db); }
  bool in_transaction() const { return !sqlite3_get_autocommit(m_db); }

 private:
  sqlite3* m_db = nullptr;
  std::string m_path;
};

/// A prepared statement. Bind indexes are 1-based (SQLite's), column indexes 0-based.
class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3* db, std::string_view sql);
  ~Stmt();
  Stmt(Stmt&& o) noexcept;
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  explicit operator bool() const { return m_stmt != nullptr; }
  sqlite3_stmt* handle() const { return m_stmt; }

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  /// NaN binds NULL (SQLite stores NaN as NULL anyway; this makes it explicit).
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind_null(int i);
  Stmt& bind_blob(int i, const void* data, size_t size);
  template <class T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  /// Advances: true when a row is ready, false when done. Throws on errors.
  bool step();
  /// step() for statements that return no rows; then reset() so the statement can run again.
  void run();
  /// Resets for re-execution; keeps the bindings.
  void reset();
  void clear_bindings();

  bool is_null(int col) const { return sqlite3_column_type(m_stmt, col) == SQLITE_NULL; }
  int64_t col_int(int col) const { return sqlite3_column_int64(m_stmt, col); }
  /// NULL reads as NaN (how the store writes non-finite values it cannot keep).
  double col_double(int col) const { return is_null(col) ? std::nan("") : sqlite3_column_double(m_stmt, col); }
  std::string col_text(int col) const;
  /// The bytes of a BLOB (or TEXT) column; valid until the next step/reset.
  std::string_view col_blob(int col) const {
    const void* p = sqlite3_column_blob(m_stmt, col);
    return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(m_stmt, col)))
             : std::string_view();
  }
  std::optional<int64_t> col_opt_int(int col) const {
    return is_null(col) ? std::nullopt : std::optional<int64_t>(col_int(col));
  }
  std::string sql() const;

 private:
  sqlite3_stmt* m_stmt = nullptr;
  sqlite3* m_db = nullptr;
};

/// Runs fn() and returns its result, retrying while it throws a busy SqliteError (another
/// connection holds the write lock: each try already waits the connection's busy timeout), with a
/// pause growing from 50 ms to 1 s, until `for_ms` have passed; then the last error propagates.
template <class F>
auto retry_busy(int64_t for_ms, F&& fn) -> decltype(fn()) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(for_ms);
  int pause_ms = 50;
  for (;;) {
    try {
      return fn();
    } catch (const SqliteError& e) {
      if (!e.busy() || std::chrono::steady_clock::now() >= end)
        throw;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    pause_ms = std::min(pause_ms * 2, 1000);
  }
}

/// BEGIN (deferred: a read snapshot) or BEGIN IMMEDIATE (takes the write lock now, so the
/// transaction never fails half-way on lock upgrade). Rolls back in the destructor unless
/// commit() ran; the destructor never throws.
class Txn {
 public:
  enum class Kind { read, write };
  Txn(Db& db, Kind kind);
  ~Txn();
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  void commit();

 private:
  Db& m_db;
  bool m_open = false;
};

}  // namespace lathe::sql
