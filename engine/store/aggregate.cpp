// Agg merging in C++ and in SQL (kept side by side so the two rule sets cannot drift), and the
// per-series block builder.
#include "engine/store/aggregate.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace lathe::store_detail {

void Agg::add(const Point& p) {
  if (count == 0 || p.step < first.step)
    first = p;
  if (count == 0 || p.step > last.step)
    last = p;
  ++count;
  if (std::isnan(p.value))
    return;
  if (!has_extrema) {
    min = max = p;
    has_extrema = true;
    return;
  }
  if (p.value < min.value)
    min = p;
  if (p.value > max.value)
    max = p;
}

void Agg::merge(const Agg& o) {
  if (o.count == 0)
    return;
  if (count == 0) {
    *this = o;
    return;
  }
  if (o.first.step < first.step)
    first = o.first;
  if (o.last.step > last.step)
    last = o.last;
  count += o.count;
  if (!o.has_extrema)
    return;
  if (!has_extrema) {
    min = o.min;
    max = o.max;
    has_extrema = true;
    return;
  }
  if (o.min.value < min.value)
    min = o.min;
  if (o.max.value > max.value)
    max = o.max;
}

// In an UPDATE every expression sees the row as it was, so each column can test the old values.
const char* Agg::merge_sql() {
  return "count = count + excluded.count,"
         " first_wall = iif(excluded.first_step < first_step, excluded.first_wall, first_wall),"
         " first_value = iif(excluded.first_step < first_step, excluded.first_value, first_value),"
         " first_step = min(first_step, excluded.first_step),"
         " last_wall = iif(excluded.last_step > last_step, excluded.last_wall, last_wall),"
         " last_value = iif(excluded.last_step > last_step, excluded.last_value, last_value),"
         " last_step = max(last_step, excluded.last_step),"
         " min_step = iif(excluded.min_step IS NOT NULL AND (min_step IS NULL OR excluded.min_value < min_value),"
         " excluded.min_step, min_step),"
         " min_wall = iif(excluded.min_step IS NOT NULL AND (min_step IS NULL OR excluded.min_value < min_value),"
         " excluded.min_wall, min_wall),"
         " min_value = iif(excluded.min_step IS NOT NULL AND (min_step IS NULL OR excluded.min_value < min_value),"
         " excluded.min_value, min_value),"
         " max_step = iif(excluded.max_step IS NOT NULL AND (max_step IS NULL OR excluded.max_value > max_value),"
         " excluded.max_step, max_step),"
         " max_wall = iif(excluded.max_step IS NOT NULL AND (max_step IS NULL OR excluded.max_value > max_value),"
         " excluded.max_wall, max_wall),"
         " max_value = iif(excluded.max_step IS NOT NULL AND (max_step IS NULL OR excluded.max_value > max_value),"
         " excluded.max_value, max_value)";
}

const char* const kAggColumns =
    "count, first_step, first_wall, first_value, last_step, last_wall, last_value,"
    " min_step, min_wall, min_value, max_step, max_wall, max_value";

void bind_agg(sql::Stmt& s, int i, const Agg& a) {
  s.bind(i, a.count);
  s.bind(i + 1, a.first.step).bind(i + 2, a.first.wall_ms).bind(i + 3, a.first.value);
  s.bind(i + 4, a.last.step).bind(i + 5, a.last.wall_ms).bind(i + 6, a.last.value);
  if (a.has_extrema) {
    s.bind(i + 7, a.min.step).bind(i + 8, a.min.wall_ms).bind(i + 9, a.min.value);
    s.bind(i + 10, a.max.step).bind(i + 11, a.max.wall_ms).bind(i + 12, a.max.value);
  } else {
    for (int k = 7; k < 13; ++k)
      s.bind_null(i + k);
  }
}

Agg read_agg(const sql::Stmt& s, int c) {
  Agg a;
  a.count = s.col_int(c);
  a.first = {s.col_int(c + 1), s.col_double(c + 2), s.col_double(c + 3)};
  a.last = {s.col_int(c + 4), s.col_double(c + 5), s.col_double(c + 6)};
  a.has_extrema = !s.is_null(c + 7);
  if (a.has_extrema) {
    a.min = {s.col_int(c + 7), s.col_double(c + 8), s.col_double(c + 9)};
    a.max = {s.col_int(c + 10), s.col_double(c + 11), s.col_double(c + 12)};
  } else {
    const double nan = std::nan("");
    a.min = a.max = {a.first.step, a.first.wall_ms, nan};
  }
  return a;
}

std::string block_upsert_sql() {
  return std::string("INSERT INTO sample_blocks(run, metric, level, block, ") + kAggColumns +
         ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)"
         " ON CONFLICT(run, metric, level, block) DO UPDATE SET " +
         Agg::merge_sql();
}

std::string summary_upsert_sql() {
  return std::string("INSERT INTO metric_summary(run, metric, ") + kAggColumns +
         ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)"
         " ON CONFLICT(run, metric) DO UPDATE SET " +
         Agg::merge_sql();
}

// ---- SeriesBuilder -----------------------------------------------------------------------------

void SeriesBuilder::add(const Point& p) {
  m_summary.add(p);
  for (int level = 1; level <= kBlockLevels; ++level) {
    Open& o = m_open[level - 1];
    const int64_t b = block_of(p.step, level);
    if (o.used && o.block != b) {
      m_closed.push_back({level, o.block, o.agg});
      o.used = false;
    }
    if (!o.used) {
      o.used = true;
      o.block = b;
      o.agg = Agg{};
    }
    o.agg.add(p);
  }
}

std::vector<SeriesBuilder::BlockAgg> SeriesBuilder::drain_blocks() {
  for (int level = 1; level <= kBlockLevels; ++level) {
    Open& o = m_open[level - 1];
    if (o.used)
      m_closed.push_back({level, o.block, o.agg});
    o.used = false;
  }
  std::vector<BlockAgg> out;
  out.swap(m_closed);
  return out;
}

void SeriesBuilder::clear() {
  m_summary = Agg{};
  for (Open& o : m_open)
    o.used = false;
  m_closed.clear();
}

void upsert_series(sql::Stmt& block_upsert, sql::Stmt& summary_upsert, int64_t run, int64_t metric, SeriesBuilder& b) {
  if (b.empty())
    return;
  for (const SeriesBuilder::BlockAgg& blk : b.drain_blocks()) {
    block_upsert.bind(1, run).bind(2, metric).bind(3, blk.level).bind(4, blk.block);
    bind_agg(block_upsert, 5, blk.agg);
    block_upsert.run();
  }
  summary_upsert.bind(1, run).bind(2, metric);
  bind_agg(summary_upsert, 3, b.summary());
  summary_upsert.run();
  b.clear();
}

// ---- summary pack ------------------------------------------------------------------------------

namespace {
constexpr size_t kPackFields = 10;
constexpr int64_t kNoExtrema = std::numeric_limits<int64_t>::min();

void put(std::string& out, int64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
  out.append(b, 8);
}
void put(std::string& out, double v) {
  int64_t bits;
  std::memcpy(&bits, &v, 8);
  put(out, bits);
}
int64_t get_int(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return static_cast<int64_t>(v);
}
double get_double(const char* p) {
  const int64_t bits = get_int(p);
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}
}  // namespace

std::string pack_summaries(const std::vector<std::pair<int64_t, Agg>>& rows) {
  std::string out;
  out.reserve(rows.size() * kPackFields * 8);
  for (const auto& [id, a] : rows) {
    put(out, id);
    put(out, a.count);
    put(out, a.first.step);
    put(out, a.last.step);
    put(out, a.last.wall_ms);
    put(out, a.last.value);
    put(out, a.has_extrema ? a.min.step : kNoExtrema);
    put(out, a.min.value);
    put(out, a.max.step);
    put(out, a.max.value);
  }
  return out;
}

std::vector<std::pair<int64_t, Agg>> unpack_summaries(std::string_view pack) {
  std::vector<std::pair<int64_t, Agg>> rows;
  constexpr size_t kRow = kPackFields * 8;
  rows.reserve(pack.size() / kRow);
  for (size_t off = 0; off + kRow <= pack.size(); off += kRow) {
    const char* p = pack.data() + off;
    Agg a;
    a.count = get_int(p + 8);
    a.first.step = get_int(p + 16);
    a.last.step = get_int(p + 24);
    a.last.wall_ms = get_double(p + 32);
    a.last.value = get_double(p + 40);
    const int64_t min_step = get_int(p + 48);
    a.has_extrema = min_step != kNoExtrema;
    if (a.has_extrema) {
      a.min = {min_step, 0.0, get_double(p + 56)};
      a.max = {get_int(p + 64), 0.0, get_double(p + 72)};
    } else {
      a.min = a.max = {a.first.step, 0.0, std::nan("")};
    }
    rows.emplace_back(get_int(p), a);
  }
  return rows;
}

void refresh_summary_pack(sql::Db& db, int64_t rid) {
  // Sorted by name, the order list_runs hands them out in (agg column names are unambiguous here).
  sql::Stmt q =
      db.prepare(std::string("SELECT s.metric, ") + kAggColumns +
                 " FROM metric_summary s JOIN metric_keys k ON k.id = s.metric WHERE s.run = ? ORDER BY k.name");
  q.bind(1, rid);
  std::vector<std::pair<int64_t, Agg>> rows;
  while (q.step())
    rows.emplace_back(q.col_int(0), read_agg(q, 1));
  const std::string pack = pack_summaries(rows);
  sql::Stmt up = db.prepare("UPDATE runs SET summary_pack = ? WHERE rid = ?");
  up.bind_blob(1, pack.data(), pack.size()).bind(2, rid).run();
}

}  // namespace lathe::store_detail
