// Store: metric-level queries. Summaries, live tails (series from a step on), min/max-preserving
// downsampling, full export, telemetry, events and artifacts.
//
// Downsampling: with span = hi - lo + 1 steps and N buckets the natural width is w = ceil(span/N).
// Below 16 steps per bucket the raw samples are read (at most 16N rows). Otherwise the coarsest
// block level whose width B <= w is used, the width is rounded up to a multiple of B and buckets
// are aligned to B, so each bucket is a union of whole blocks: at most ~16N block rows are read
// whatever the series length, and merging exact aggregates keeps every min and max.
#include <algorithm>

#include "engine/store/process_info.h"
#include "engine/store/store.h"
#include "engine/store/store_sql.h"

namespace lathe {

using namespace store_detail;

std::optional<std::pair<int64_t, Direction>> Store::metric_key(const std::string& metric) const {
  sql::Stmt q = m_db->prepare("SELECT id, direction FROM metric_keys WHERE name = ?");
  if (!q.bind(1, metric).step())
    return std::nullopt;
  return std::make_pair(q.col_int(0), q.col_int(1) < 0 ? Direction::minimize : Direction::maximize);
}

std::vector<MetricSummary> Store::summaries(const std::string& run_id) const {
  const int64_t rid = rid_of(run_id);
  sql::Stmt q = m_db->prepare(std::string("SELECT k.name, k.direction, ") + kAggColumns +
                              " FROM metric_summary s JOIN metric_keys k ON k.id = s.metric WHERE s.run = ?"
                              " ORDER BY k.name");
  q.bind(1, rid);
  std::vector<MetricSummary> out;
  while (q.step())
    out.push_back(
        to_summary(q.col_text(0), q.col_int(1) < 0 ? Direction::minimize : Direction::maximize, read_agg(q, 2)));
  return out;
}

std::optional<MetricSummary> Store::summary(const std::string& run_id, const std::string& metric) const {
  const int64_t rid = rid_of(run_id);
  const auto key = metric_key(metric);
  if (!key)
    return std::nullopt;
  sql::Stmt q =
      m_db->prepare(std::string("SELECT ") + kAggColumns + " FROM metric_summary WHERE run = ? AND metric = ?");
  if (!q.bind(1, rid).bind(2, key->first).step())
    return std::nullopt;
  return to_summary(metric, key->second, read_agg(q, 0));
}

void Store::set_direction(const std::string& metric, Direction direction) {
  sql::Stmt q = m_db->prepare(
      "INSERT INTO metric_keys(name, direction) VALUES(?1, ?2) ON CONFLICT(name) DO UPDATE SET direction = ?2");
  q.bind(1, metric).bind(2, static_cast<int64_t>(direction)).run();
}

std::vector<Point> Store::series(const std::string& run_id, const std::string& metric, int64_t from_step,
                                 int64_t max_points) const {
  const int64_t rid = rid_of(run_id);
  std::vector<Point> out;
  const auto key = metric_key(metric);
  if (!key)
    return out;
  sql::Stmt q = m_db->prepare(
      "SELECT step, wall_ms, value FROM samples WHERE run = ? AND metric = ? AND step >= ? ORDER BY step LIMIT ?");
  q.bind(1, rid).bind(2, key->first).bind(3, from_step).bind(4, max_points > 0 ? max_points : int64_t{-1});
  while (q.step())
    out.push_back({q.col_int(0), q.col_double(1), q.col_double(2)});
  return out;
}

namespace {

Bucket to_bucket(const Agg& a, int64_t lo, int64_t hi) {
  Bucket b;
  b.step_lo = lo;
  b.step_hi = hi;
  b.count = a.count;
  b.first = a.first;
  b.last = a.last;
  if (a.has_extrema) {
    b.min = a.min;
    b.max = a.max;
  } else {
    b.min = b.max = {a.first.step, a.first.wall_ms, std::nan("")};
  }
  return b;
}

int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }  // a >= 0, b > 0

}  // namespace

DownsampledSeries Store::downsample(const std::string& run_id, const std::string& metric, int buckets,
                                    std::optional<int64_t> from_step, std::optional<int64_t> to_step) const {
  if (buckets < 1)
    throw DataError("downsample needs at least 1 bucket, got " + std::to_string(buckets));
  const int64_t rid = rid_of(run_id);
  DownsampledSeries out;
  const auto key = metric_key(metric);
  if (!key)
    return out;
  sql::Txn snapshot(*m_db, sql::Txn::Kind::read);  // the range and the rows from one snapshot
  int64_t lo = 0, hi = 0;
  {
    sql::Stmt s = m_db->prepare("SELECT first_step, last_step FROM metric_summary WHERE run = ? AND metric = ?");
    if (!s.bind(1, rid).bind(2, key->first).step())
      return out;
    lo = std::max(s.col_int(0), from_step.value_or(s.col_int(0)));
    hi = std::min(s.col_int(1), to_step.value_or(s.col_int(1)));
  }
  if (lo > hi)
    return out;
  const int64_t span = hi - lo + 1;
  const int64_t natural = ceil_div(span, buckets);
  int level = 0;
  while (level < kBlockLevels && block_width(level + 1) <= natural)
    ++level;

  int64_t current = -1;
  Agg acc;
  int64_t base = lo, width = natural, last_hi = hi;
  const auto close = [&]() {
    if (acc.count == 0)
      return;
    const int64_t b_lo = base + current * width;
    out.buckets.push_back(to_bucket(acc, b_lo, std::min(b_lo + width - 1, last_hi)));
    acc = Agg{};
  };

  if (level == 0) {
    sql::Stmt q = m_db->prepare(
        "SELECT step, wall_ms, value FROM samples WHERE run = ? AND metric = ? AND step BETWEEN ? AND ?"
        " ORDER BY step");
    q.bind(1, rid).bind(2, key->first).bind(3, lo).bind(4, hi);
    while (q.step()) {
      const Point p{q.col_int(0), q.col_double(1), q.col_double(2)};
      const int64_t idx = (p.step - base) / width;
      if (idx != current) {
        close();
        current = idx;
      }
      acc.add(p);
    }
  } else {
    const int64_t bw = block_width(level);
    const int64_t first_block = block_of(lo, level), last_block = block_of(hi, level);
    base = first_block * bw;
    last_hi = last_block * bw + bw - 1;
    width = ceil_div(ceil_div(last_hi - base + 1, buckets), bw) * bw;
    sql::Stmt q = m_db->prepare(std::string("SELECT block, ") + kAggColumns +
                                " FROM sample_blocks WHERE run = ? AND metric = ? AND level = ?"
                                " AND block BETWEEN ? AND ? ORDER BY block");
    q.bind(1, rid).bind(2, key->first).bind(3, level).bind(4, first_block).bind(5, last_block);
    while (q.step()) {
      const int64_t idx = (q.col_int(0) * bw - base) / width;
      if (idx != current) {
        close();
        current = idx;
      }
      acc.merge(read_agg(q, 1));
    }
  }
  close();
  out.bucket_width = width;
  return out;
}

void Store::for_each_sample(const std::string& run_id,
                            const std::function<void(const std::string& metric, const Point&)>& fn) const {
  const int64_t rid = rid_of(run_id);
  sql::Txn snapshot(*m_db, sql::Txn::Kind::read);
  std::vector<std::pair<std::string, int64_t>> metrics;
  {
    sql::Stmt m = m_db->prepare(
        "SELECT k.name, k.id FROM metric_summary s JOIN metric_keys k ON k.id = s.metric WHERE s.run = ?"
        " ORDER BY k.name");
    m.bind(1, rid);
    while (m.step())
      metrics.emplace_back(m.col_text(0), m.col_int(1));
  }
  sql::Stmt q = m_db->prepare("SELECT step, wall_ms, value FROM samples WHERE run = ? AND metric = ? ORDER BY step");
  for (const auto& [name, id] : metrics) {
    q.bind(1, rid).bind(2, id);
    while (q.step())
      fn(name, {q.col_int(0), q.col_double(1), q.col_double(2)});
    q.reset();
  }
}

std::vector<TelemetryPoint> Store::telemetry(const std::string& run_id, const std::string& metric,
                                             double from_wall_ms) const {
  const int64_t rid = rid_of(run_id);
  std::vector<TelemetryPoint> out;
  const auto key = metric_key(metric);
  if (!key)
    return out;
  sql::Stmt q = m_db->prepare(
      "SELECT device, wall_ms, value FROM telemetry WHERE run = ? AND metric = ? AND wall_ms >= ?"
      " ORDER BY wall_ms, device");
  q.bind(1, rid).bind(2, key->first).bind(3, from_wall_ms);
  while (q.step())
    out.push_back({static_cast<int>(q.col_int(0)), q.col_double(1), q.col_double(2)});
  return out;
}

std::vector<EventRecord> Store::events(const std::string& run_id, int64_t after_id) const {
  const int64_t rid = rid_of(run_id);
  sql::Stmt q = m_db->prepare("SELECT id, at_ms, kind, fields FROM events WHERE run = ? AND id > ? ORDER BY id");
  q.bind(1, rid).bind(2, after_id);
  std::vector<EventRecord> out;
  while (q.step()) {
    EventRecord e{q.col_int(0), q.col_int(1), q.col_text(2), nlohmann::json::parse(q.col_text(3), nullptr, false)};
    if (e.fields.is_discarded())
      e.fields = nlohmann::json::object();
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> Store::metric_names() const {
  sql::Stmt q = m_db->prepare("SELECT name FROM metric_keys ORDER BY name");
  std::vector<std::string> out;
  while (q.step())
    out.push_back(q.col_text(0));
  return out;
}

std::vector<ArtifactRecord> Store::artifacts(const std::string& run_id) const {
  const int64_t rid = rid_of(run_id);
  sql::Stmt q =
      m_db->prepare("SELECT id, kind, path, bytes, sha256, step, created_ms FROM artifacts WHERE run = ? ORDER BY id");
  q.bind(1, rid);
  std::vector<ArtifactRecord> out;
  while (q.step())
    out.push_back(
        {q.col_int(0), q.col_text(1), q.col_text(2), q.col_int(3), q.col_text(4), q.col_opt_int(5), q.col_int(6)});
  return out;
}

}  // namespace lathe
