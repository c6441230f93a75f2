// Series aggregates shared by the writer, the v1->v2 migration and the downsampling queries:
// an Agg (count, first, last, min, max, each with its step and wall time) that merges exactly, and
// the block pyramid behind fast overview charts. sample_blocks holds one Agg per (run, metric,
// level, block) where a level-L block covers 16^L consecutive steps (L = 1..5); a 1M-sample series
// downsampled to 2,000 buckets then reads a few thousand block rows instead of a million samples,
// and because Aggs merge exactly, every bucket's min and max are the true ones.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/store/sqlite_util.h"
#include "engine/store/store_types.h"

namespace lathe::store_detail {

constexpr int kBlockLevels = 5;
constexpr int kBlockShift = 4;  // a level-L block spans 2^(4L) = 16^L steps

/// Floor division by 16^level (an arithmetic shift: exact for negative steps too).
inline int64_t block_of(int64_t step, int level) { return step >> (kBlockShift * level); }
inline int64_t block_width(int level) { return int64_t{1} << (kBlockShift * level); }

/// Exact, mergeable summary of a set of samples. NaN values count and can be first/last, but never
/// min/max (has_extrema is false when every sample was NaN). Ties keep the earlier-merged sample.
struct Agg {
  int64_t count = 0;
  Point first, last, min, max;
  bool has_extrema = false;

  void add(const Point& p);
  void merge(const Agg& o);
  /// The same rules written as the ON CONFLICT DO UPDATE of the upserts below.
  static const char* merge_sql();
};

/// Column list of an Agg in every table that stores one (13 columns).
extern const char* const kAggColumns;
/// Binds the 13 Agg columns starting at parameter `first`.
void bind_agg(sql::Stmt& s, int first, const Agg& a);
/// Reads the 13 Agg columns starting at column `first`.
Agg read_agg(const sql::Stmt& s, int first);

/// INSERT ... ON CONFLICT merge: parameters (run, metric, level, block, <13 agg columns>).
std::string block_upsert_sql();
/// INSERT ... ON CONFLICT merge: parameters (run, metric, <13 agg columns>).
std::string summary_upsert_sql();

/// Accumulates one series' new samples (in any order) into the summary delta and the touched
/// blocks of every level; drain() hands them out for upserting and starts afresh. Samples usually
/// arrive in step order, so each level keeps one open block and closes it when the step moves on.
class SeriesBuilder {
 public:
  struct BlockAgg {
    int level;
    int64_t block;
    Agg agg;
  };
  void add(const Point& p);
  bool empty() const { return m_summary.count == 0; }
  const Agg& summary() const { return m_summary; }
  /// Closes every open block and returns all touched blocks (a block may repeat when samples came
  /// out of order: the upsert merges them).
  std::vector<BlockAgg> drain_blocks();
  void clear();

 private:
  struct Open {
    bool used = false;
    int64_t block = 0;
    Agg agg;
  };
  Agg m_summary;
  std::array<Open, kBlockLevels> m_open{};
  std::vector<BlockAgg> m_closed;
};

/// runs.summary_pack: every metric_summary row of a run packed into one BLOB, so listing 10,000
/// runs reads 10,000 rows rather than one per (run, metric). A cache of metric_summary, rewritten
/// by refresh_summary_pack() in the same transaction as the summaries it copies. Layout: per
/// metric 10 little-endian 8-byte fields (id, count, first_step, last_step, last_wall, last_value,
/// min_step, min_value, max_step, max_value); min_step = INT64_MIN when the metric has no extrema.
std::string pack_summaries(const std::vector<std::pair<int64_t, Agg>>& rows);
/// The inverse; a malformed pack yields what could be read (never throws, never reads past `pack`).
std::vector<std::pair<int64_t, Agg>> unpack_summaries(std::string_view pack);
/// Re-reads the run's metric_summary rows and rewrites runs.summary_pack.
void refresh_summary_pack(sql::Db& db, int64_t rid);

/// Writes a builder's blocks and summary delta for (run, metric) with the two prepared upserts.
void upsert_series(sql::Stmt& block_upsert, sql::Stmt& summary_upsert, int64_t run, int64_t metric, SeriesBuilder& b);

}  // namespace lathe::store_detail
