// Batch sample insertion: fresh rows 64 per statement in key order, the rest one by one.
#include "engine/store/sample_inserter.h"

#include <cmath>
#include <string>

namespace lathe::store_detail {

namespace {

constexpr int kRowsPerInsert = 64;

std::string many_rows_sql() {
  std::string s = "INSERT OR IGNORE INTO samples(run, metric, step, wall_ms, value) VALUES(?,?,?,?,?)";
  for (int i = 1; i < kRowsPerInsert; ++i)
    s += ",(?,?,?,?,?)";
  return s;
}

inline int bind_value(sqlite3_stmt* st, int i, double v) {
  return std::isnan(v) ? sqlite3_bind_null(st, i) : sqlite3_bind_double(st, i, v);
}

}  // namespace

SampleInserter::SampleInserter(sql::Db& db)
    : m_db(db),
      m_one(db.prepare("INSERT OR IGNORE INTO samples(run, metric, step, wall_ms, value) VALUES(?1, ?2, ?3, ?4, ?5)")),
      m_many(db.prepare(many_rows_sql())),
      m_block_upsert(db.prepare(block_upsert_sql())),
      m_summary_upsert(db.prepare(summary_upsert_sql())) {}

void SampleInserter::reset() {
  for (sql::Stmt* s : {&m_one, &m_many, &m_block_upsert, &m_summary_upsert})
    s->reset();
}

void SampleInserter::committed() { m_stored_hi = m_pending_hi; }

bool SampleInserter::insert_one(int64_t rid, int64_t metric, const QueuedSample& s) {
  sqlite3_stmt* st = m_one.handle();
  int rc = sqlite3_bind_int64(st, 1, rid);
  rc |= sqlite3_bind_int64(st, 2, metric);
  rc |= sqlite3_bind_int64(st, 3, s.step);
  rc |= sqlite3_bind_double(st, 4, s.wall_ms);
  rc |= bind_value(st, 5, s.value);
  if (rc != SQLITE_OK)
    sql::throw_sqlite(m_db.handle(), rc, "binding a sample", __FILE__, __LINE__);
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE)
    sql::throw_sqlite(m_db.handle(), rc, "INSERT INTO samples", __FILE__, __LINE__);
  return m_db.changes() == 1;
}

void SampleInserter::insert_fresh(int64_t rid, int64_t metric, const std::vector<const QueuedSample*>& rows) {
  sqlite3_stmt* st = m_many.handle();
  size_t i = 0;
  for (; i + kRowsPerInsert <= rows.size(); i += kRowsPerInsert) {
    int rc = SQLITE_OK;
    for (int k = 0; k < kRowsPerInsert; ++k) {
      const QueuedSample& s = *rows[i + static_cast<size_t>(k)];
      const int b = 5 * k;
      rc |= sqlite3_bind_int64(st, b + 1, rid);
      rc |= sqlite3_bind_int64(st, b + 2, metric);
      rc |= sqlite3_bind_int64(st, b + 3, s.step);
      rc |= sqlite3_bind_double(st, b + 4, s.wall_ms);
      rc |= bind_value(st, b + 5, s.value);
    }
    if (rc != SQLITE_OK)
      sql::throw_sqlite(m_db.handle(), rc, "binding samples", __FILE__, __LINE__);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE)
      sql::throw_sqlite(m_db.handle(), rc, "INSERT INTO samples (64 rows)", __FILE__, __LINE__);
    if (m_db.changes() != kRowsPerInsert)
      throw FastPathMismatch("samples above the last stored step were already in the store");
  }
  for (; i < rows.size(); ++i)
    if (!insert_one(rid, metric, *rows[i]))
      throw FastPathMismatch("a sample above the last stored step was already in the store");
}

int64_t SampleInserter::insert(int64_t rid, const std::vector<QueuedSample>& samples, const std::vector<int64_t>& ids,
                               const std::vector<int64_t>& floors, bool safe) {
  const size_t n = ids.size();
  while (m_stored_hi.size() < n)
    m_stored_hi.push_back(floors[m_stored_hi.size()]);
  m_pending_hi = m_stored_hi;
  if (m_fresh.size() < n)
    m_fresh.resize(n);
  if (m_builders.size() < n)
    m_builders.resize(n);
  for (size_t i = 0; i < n; ++i) {
    m_fresh[i].clear();
    m_builders[i].clear();
  }

  // Fresh rows strictly increase per metric, so each metric's list is already in key order.
  std::vector<const QueuedSample*> others;
  for (const QueuedSample& s : samples) {
    const auto idx = static_cast<size_t>(s.metric);
    LATHE_CHECK(idx < n, "sample of metric index ", idx, " beyond the ", n, " resolved");
    if (!safe && s.step > m_pending_hi[idx]) {
      m_fresh[idx].push_back(&s);
      m_pending_hi[idx] = s.step;
    } else {
      others.push_back(&s);
    }
  }
  int64_t inserted = 0;
  for (size_t idx = 0; idx < n; ++idx) {
    if (m_fresh[idx].empty())
      continue;
    insert_fresh(rid, ids[idx], m_fresh[idx]);
    for (const QueuedSample* s : m_fresh[idx])
      m_builders[idx].add({s->step, s->wall_ms, s->value});
    inserted += static_cast<int64_t>(m_fresh[idx].size());
  }
  // Repeats and out-of-order steps, in arrival order: the first value of a (metric, step) wins.
  for (const QueuedSample* s : others) {
    const auto idx = static_cast<size_t>(s->metric);
    if (!insert_one(rid, ids[idx], *s))
      continue;
    m_builders[idx].add({s->step, s->wall_ms, s->value});
    m_pending_hi[idx] = std::max(m_pending_hi[idx], s->step);
    ++inserted;
  }
  for (size_t idx = 0; idx < n; ++idx)
    if (!m_builders[idx].empty())
      upsert_series(m_block_upsert, m_summary_upsert, rid, ids[idx], m_builders[idx]);
  return inserted;
}

}  // namespace lathe::store_detail
