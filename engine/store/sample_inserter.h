// The writer's hot path: inserting one batch of samples of one run, plus the matching
// sample_blocks and metric_summary upserts, inside the caller's transaction.
//
// Why it is more than a loop of INSERTs: a sample whose step is above every step of its metric
// that the store (or this batch) already holds cannot be a repeat, so those "fresh" samples are
// grouped by metric and inserted 64 rows per statement, in key order (about twice the rows/s of
// one-row statements); their aggregates need no per-row check. Everything else (repeats,
// out-of-order steps) goes one row at a time with INSERT OR IGNORE and counts only when a row
// went in. If a 64-row insert ever finds rows already there (another process wrote the run), the
// caller redoes the batch with `safe` set: one row at a time throughout.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/error.h"
#include "engine/store/aggregate.h"
#include "engine/store/sqlite_util.h"

namespace lathe::store_detail {

struct QueuedSample {
  int32_t metric;  // the writer's metric index (not the database id)
  int64_t step;
  double wall_ms, value;
};

/// Thrown when the fast path met rows it did not expect; the batch must be redone with safe=true.
class FastPathMismatch : public Error {
 public:
  using Error::Error;
};

class SampleInserter {
 public:
  explicit SampleInserter(sql::Db& db);

  /// Inserts `samples` of run `rid`: `ids[i]` is the database id of metric index i, `floors[i]`
  /// the highest step the store held for it when the run was taken over (INT64_MIN for none).
  /// Returns the rows inserted. Nothing is remembered until committed() is called.
  int64_t insert(int64_t rid, const std::vector<QueuedSample>& samples, const std::vector<int64_t>& ids,
                 const std::vector<int64_t>& floors, bool safe);
  /// The transaction holding the last insert() committed: its steps now count as stored.
  void committed();
  /// Every statement back to its start (after a failed attempt).
  void reset();

 private:
  void insert_fresh(int64_t rid, int64_t metric, const std::vector<const QueuedSample*>& rows);
  bool insert_one(int64_t rid, int64_t metric, const QueuedSample& s);

  sql::Db& m_db;
  sql::Stmt m_one, m_many, m_block_upsert, m_summary_upsert;
  std::vector<int64_t> m_stored_hi;                       // per metric index: highest step known to be stored
  std::vector<int64_t> m_pending_hi;                      // ... including the uncommitted batch
  std::vector<std::vector<const QueuedSample*>> m_fresh;  // per metric index, reused
  std::vector<SeriesBuilder> m_builders;                  // per metric index, reused
};

}  // namespace lathe::store_detail
