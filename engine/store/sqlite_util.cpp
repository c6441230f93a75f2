// SQLite RAII wrappers: error formatting, connection set-up, statements and transactions.
#include "engine/store/sqlite_util.h"

#include <unistd.h>

#include <utility>

namespace lathe::sql {

void throw_sqlite(sqlite3* db, int rc, const char* what, const char* file, int line) {
  std::string msg = "SQLite error ";
  msg += std::to_string(rc);
  msg += " (";
  msg += sqlite3_errstr(rc);
  msg += ")";
  if (db && sqlite3_errcode(db) == rc) {
    msg += ": ";
    msg += sqlite3_errmsg(db);
  }
  msg += " in ";
  msg += what;
  if (db) {
    if (const char* name = sqlite3_db_filename(db, "main"); name && *name) {
      msg += " on ";
      msg += name;
    }
  }
  msg += " [";
  msg += file;
  msg += ":";
  msg += std::to_string(line);
  msg += "]";
  throw SqliteError(msg, rc);
}

// ---- Db ----------------------------------------------------------------------------------------

Db::Db(const std::string& path, int busy_timeout_ms, bool read_only) : m_path(path) {
  const int flags =
      (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path.c_str(), &m_db, flags, nullptr);
  if (rc == SQLITE_OK && read_only && access(path.c_str(), R_OK) != 0)
    rc = SQLITE_CANTOPEN;
  if (rc == SQLITE_OK)  // before the probe below: a read while another connection holds the lock waits
    sqlite3_busy_timeout(m_db, busy_timeout_ms);
  if (rc == SQLITE_OK && read_only) {
    // A read-only WAL connection needs the -shm file; probe with a read, and where it cannot be
    // made (a folder we cannot write), reopen the file as immutable.
    rc = sqlite3_exec(m_db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
    if ((rc & 0xff) == SQLITE_CANTOPEN || (rc & 0xff) == SQLITE_READONLY) {
      sqlite3_close(m_db);
      m_db = nullptr;
      const std::string uri = "file:" + path + "?immutable=1";
      rc = sqlite3_open_v2(uri.c_str(), &m_db, flags | SQLITE_OPEN_URI, nullptr);
    } else if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
      rc = SQLITE_OK;  // reported by the caller's schema check, with the file named (Store::open_read_only)
    }
  }
  if (rc != SQLITE_OK) {
    std::string msg = m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
    sqlite3_close(m_db);
    m_db = nullptr;
    throw DataError("cannot open the store " + path + ": " + msg);
  }
  sqlite3_extended_result_codes(m_db, 1);
  sqlite3_busy_timeout(m_db, busy_timeout_ms);
}

Db::~Db() {
  // sqlite3_close_v2 defers the close until the last statement is finalized: never fails loudly.
  if (m_db)
    sqlite3_close_v2(m_db);
}

void Db::exec(const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    const std::string text = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    std::string stmt = sql.size() > 200 ? sql.substr(0, 200) + "..." : sql;
    throw SqliteError("SQLite error " + std::to_string(rc) + ": " + text + " in " + stmt + " on " + m_path, rc);
  }
}

Stmt Db::prepare(std::string_view sql) const { return Stmt(m_db, sql); }

std::optional<int64_t> Db::query_int(std::string_view sql) const {
  Stmt s(m_db, sql);
  if (!s.step() || s.is_null(0))
    return std::nullopt;
  return s.col_int(0);
}

std::optional<std::string> Db::query_text(std::string_view sql) const {
  Stmt s(m_db, sql);
  if (!s.step() || s.is_null(0))
    return std::nullopt;
  return s.col_text(0);
}

// ---- Stmt --------------------------------------------------------------------------------------

Stmt::Stmt(sqlite3* db, std::string_view sql) : m_db(db) {
  const int rc =
      sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &m_stmt, nullptr);
  if (rc != SQLITE_OK) {
    const std::string text(sql.substr(0, 300));
    throw_sqlite(db, rc, text.c_str(), __FILE__, __LINE__);
  }
}

Stmt::~Stmt() {
  if (m_stmt)
    sqlite3_finalize(m_stmt);
}

Stmt::Stmt(Stmt&& o) noexcept : m_stmt(std::exchange(o.m_stmt, nullptr)), m_db(o.m_db) {}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    if (m_stmt)
      sqlite3_finalize(m_stmt);
    m_stmt = std::exchange(o.m_stmt, nullptr);
    m_db = o.m_db;
  }
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  LATHE_SQLITE_CHECK(m_db, sqlite3_bind_int64(m_stmt, i, v));
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  if (std::isnan(v))
    return bind_null(i);
  LATHE_SQLITE_CHECK(m_db, sqlite3_bind_double(m_stmt, i, v));
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view v) {
  LATHE_SQLITE_CHECK(m_db, sqlite3_bind_text64(m_stmt, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  LATHE_SQLITE_CHECK(m_db, sqlite3_bind_null(m_stmt, i));
  return *this;
}

Stmt& Stmt::bind_blob(int i, const void* data, size_t size) {
  LATHE_SQLITE_CHECK(m_db, sqlite3_bind_blob64(m_stmt, i, data, size, SQLITE_TRANSIENT));
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW)
    return true;
  if (rc == SQLITE_DONE)
    return false;
  const std::string text = sql();
  sqlite3_reset(m_stmt);
  throw_sqlite(m_db, rc, text.c_str(), __FILE__, __LINE__);
}

void Stmt::run() {
  while (step()) {
  }
  reset();
}

void Stmt::reset() { sqlite3_reset(m_stmt); }

void Stmt::clear_bindings() { sqlite3_clear_bindings(m_stmt); }

std::string Stmt::col_text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col))) : std::string();
}

std::string Stmt::sql() const {
  const char* s = m_stmt ? sqlite3_sql(m_stmt) : nullptr;
  std::string text = s ? s : "";
  return text.size() > 300 ? text.substr(0, 300) + "..." : text;
}

// ---- Txn ---------------------------------------------------------------------------------------

Txn::Txn(Db& db, Kind kind) : m_db(db) {
  m_db.exec(kind == Kind::write ? "BEGIN IMMEDIATE" : "BEGIN");
  m_open = true;
}

Txn::~Txn() {
  if (m_open)
    sqlite3_exec(m_db.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Txn::commit() {
  m_db.exec("COMMIT");
  m_open = false;
}

}  // namespace lathe::sql
