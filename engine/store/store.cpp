// Store: opening (create, migrate, reap stale runs), the runs table and the run-level queries
// (find, resolve, list with filters and summaries, config diff, delete). Series queries live in
// store_series.cpp.
#include "engine/store/store.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>
#include <variant>

#include <pwd.h>
#include <unistd.h>

#include "engine/run/config.h"
#include "engine/run/run_dir.h"
#include "engine/store/process_info.h"
#include "engine/store/run_files.h"
#include "engine/store/schema.h"
#include "engine/store/store_sql.h"

namespace lathe {

namespace fs = std::filesystem;
using namespace store_detail;

// ---- shared row helpers (store_sql.h) ------------------------------------------------------------

namespace store_detail {

const char* const kRunColumns =
    "r.rid, r.id, r.name, r.status, r.created_ms, r.started_ms, r.finished_ms, r.heartbeat_ms,"
    " r.host, r.backend, r.devices, r.code_version, r.pid";

RunRecord read_run(const sql::Stmt& s, int64_t* rid) {
  RunRecord r;
  if (rid)
    *rid = s.col_int(0);
  r.id = s.col_text(1);
  r.name = s.col_text(2);
  r.status = parse_status(s.col_text(3));
  r.created_ms = s.col_int(4);
  r.started_ms = s.col_opt_int(5);
  r.finished_ms = s.col_opt_int(6);
  r.heartbeat_ms = s.col_opt_int(7);
  r.host = s.col_text(8);
  r.backend = s.col_text(9);
  const std::string devices = s.col_text(10);
  if (devices.size() > 2) {  // "[]" is the common case: skip the parser
    const nlohmann::json d = nlohmann::json::parse(devices, nullptr, false);
    if (d.is_array())
      for (const auto& v : d)
        if (v.is_string())
          r.devices.push_back(v.get<std::string>());
  }
  r.code_version = s.col_text(11);
  r.pid = s.col_opt_int(12);
  return r;
}

void insert_event(sql::Db& db, int64_t rid, const std::string& kind, const nlohmann::json& fields, int64_t at_ms) {
  sql::Stmt s = db.prepare("INSERT INTO events(run, at_ms, kind, fields) VALUES(?, ?, ?, ?)");
  s.bind(1, rid).bind(2, at_ms).bind(3, kind).bind(4, fields.dump()).run();
}

std::string stale_reason(const RunRecord& r, int64_t now_ms, int64_t stale_after_ms) {
  const int64_t last_sign = r.heartbeat_ms.value_or(r.started_ms.value_or(r.created_ms));
  const int64_t quiet_s = (now_ms - last_sign) / 1000;
  const std::string who = "writer process " + (r.pid ? std::to_string(*r.pid) : std::string("?")) + " on " +
                          (r.host.empty() ? std::string("an unknown host") : r.host);
  if (r.host == host_name()) {
    if (!r.pid || !process_alive(*r.pid))
      return who + " is gone";
    if (now_ms - last_sign > stale_after_ms)
      return who + " has not sent a heartbeat for " + std::to_string(quiet_s) + " s (pid reused or hung)";
    return "";
  }
  if (now_ms - last_sign > stale_after_ms)
    return who + " has not sent a heartbeat for " + std::to_string(quiet_s) + " s";
  return "";
}

MetricSummary to_summary(std::string name, Direction d, const Agg& a) {
  MetricSummary m;
  m.metric = std::move(name);
  m.direction = d;
  m.count = a.count;
  m.first_step = a.first.step;
  m.last_step = a.last.step;
  m.last = a.last.value;
  m.last_wall_ms = a.last.wall_ms;
  m.min = a.min.value;
  m.max = a.max.value;
  m.min_step = a.min.step;
  m.max_step = a.max.step;
  return m;
}

}  // namespace store_detail

std::string format_local_time(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

namespace {

/// A query whose text is assembled from optional parts, with its parameters collected alongside.
struct SqlBuilder {
  std::string text;
  std::vector<std::variant<int64_t, std::string>> args;
  void add(const std::string& part) { text += part; }
  void arg(int64_t v) { args.emplace_back(v); }
  void arg(const std::string& v) { args.emplace_back(v); }
  sql::Stmt prepare(sql::Db& db) const {
    sql::Stmt s = db.prepare(text);
    for (size_t i = 0; i < args.size(); ++i)
      std::visit([&](const auto& v) { s.bind(static_cast<int>(i + 1), v); }, args[i]);
    return s;
  }
};

}  // namespace

// ---- opening ---------------------------------------------------------------------------------

Store::Store(std::unique_ptr<sql::Db> db) : m_db(std::move(db)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

namespace {

/// Called in the handler of `e`, an SQLite error met opening the store at `path`: a file that is no
/// SQLite database, a corrupt one, or one this process may not write (the file, or its folder,
/// where SQLite keeps the WAL) becomes a DataError naming it; any other error goes on as is.
[[noreturn]] void rethrow_open_error(const sql::SqliteError& e, const std::string& path) {
  if ((e.code() & 0xff) == SQLITE_NOTADB)
    throw DataError("the file " + path + " is not a lathe store (not an SQLite database)");
  if ((e.code() & 0xff) == SQLITE_CORRUPT)
    throw DataError("the store " + path + " is corrupt (" + e.what() + ")");
  if ((e.code() & 0xff) == SQLITE_READONLY || (e.code() & 0xff) == SQLITE_PERM || (e.code() & 0xff) == SQLITE_CANTOPEN)
    throw DataError("the store " + path + " cannot be written by this user (" + sqlite3_errstr(e.code()) +
                    "): this command changes the store, which needs write access to the file and its folder " +
                    "(list, show, compare, export and report only read it); give --db a store you may write");
  throw;
}

}  // namespace

Store Store::open(const std::string& path, const OpenOptions& options) {
  if (path.empty())
    throw DataError("the store path is empty (give --db PATH)");
  if (std::error_code ec; fs::is_directory(path, ec))
    throw DataError("the store path " + path + " is a folder; give --db a file (e.g. " +
                    (fs::path(path) / "lathe.db").string() + ")");
  if (options.read_only)
    return open_read_only(path, options);
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      throw DataError("cannot create the folder " + parent.string() + " for the store: " + ec.message());
  }
  if (std::error_code ec; !fs::exists(path, ec) && ::access(parent.empty() ? "." : parent.c_str(), W_OK) != 0)
    throw DataError("cannot create the store " + path + ": its folder " + (parent.empty() ? "." : parent.string()) +
                    " is not writable by this user; give --db a path you may write");
  auto db = std::make_unique<sql::Db>(path, options.busy_timeout_ms);
  try {
    store_detail::schema_version(*db);  // refuses foreign files before we touch them
    configure_connection(*db);
    migrate(*db);
  } catch (const sql::SqliteError& e) {
    rethrow_open_error(e, path);
  }
  Store store(std::move(db));
  if (options.reap_stale) {
    try {
      store.reap_stale_runs(options.stale_after_ms);
    } catch (const sql::SqliteError& e) {
      if (!e.busy())  // reaping is a courtesy: a store locked by another process still opens
        rethrow_open_error(e, path);
    }
  }
  return store;
}

Store Store::open_read_only(const std::string& path, const OpenOptions& options) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw DataError("no store at " + path + (ec ? ": " + ec.message() : "") + " (give --db PATH)");
  auto db = std::make_unique<sql::Db>(path, options.busy_timeout_ms, /*read_only=*/true);
  int version = 0;
  try {
    version = store_detail::schema_version(*db);
  } catch (const sql::SqliteError& e) {
    rethrow_open_error(e, path);
  }
  if (version < kSchemaVersion)
    throw DataError("the store " + path + " has schema version " + std::to_string(version) +
                    " and needs an upgrade to " + std::to_string(kSchemaVersion) +
                    ", which a read-only open cannot do: run any lathe-cli command that " +
                    "writes (e.g. lathe-cli run) on it once with write access");
  if (version > kSchemaVersion)
    throw DataError("the store " + path + " has schema version " + std::to_string(version) +
                    ", newer than this lathe-cli understands (" + std::to_string(kSchemaVersion) + "): update Lathe");
  return Store(std::move(db));
}

std::string Store::default_path() {
  // XDG: a relative XDG_DATA_HOME is invalid and must be ignored.
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg == '/')
    return (fs::path(xdg) / "lathe" / "lathe.db").string();
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    const passwd* pw = getpwuid(getuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  if (!home || !*home)
    throw DataError("cannot find a home folder for the default store: give --db PATH");
  return (fs::path(home) / ".local" / "share" / "lathe" / "lathe.db").string();
}

const std::string& Store::path() const { return m_db->path(); }

int Store::schema_version() const { return store_detail::schema_version(*m_db); }

// ---- runs ------------------------------------------------------------------------------------

std::string Store::create_run(const RunInfo& info, RunStatus status) {
  // make_run_id() has 24 random bits per second: a sweep queueing thousands of runs at once can
  // draw the same id twice, so a generated id that is taken is simply drawn again.
  std::string id = info.id.empty() ? make_run_id() : info.id;
  const int64_t now = unix_ms();
  const bool running = status == RunStatus::running;
  nlohmann::json devices = nlohmann::json::array();
  for (const std::string& d : info.devices)
    devices.push_back(d);

  sql::Txn txn(*m_db, sql::Txn::Kind::write);
  sql::Stmt taken = m_db->prepare("SELECT 1 FROM runs WHERE id = ?");
  for (int attempt = 0; taken.bind(1, id).step(); ++attempt) {
    taken.reset();
    if (!info.id.empty() || attempt == 20)
      throw DataError("a run with id " + id + " already exists in " + path());
    id = make_run_id();
  }
  taken.reset();
  sql::Stmt ins = m_db->prepare(
      "INSERT INTO runs(id, name, status, config, created_ms, started_ms, host, backend, devices, code_version,"
      " pid, heartbeat_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  ins.bind(1, id).bind(2, info.name).bind(3, status_name(status));
  ins.bind(4, info.config.is_null() ? std::string("{}") : info.config.dump());
  ins.bind(5, now).bind(6, running ? std::optional<int64_t>(now) : std::nullopt);
  ins.bind(7, running ? host_name() : std::string());
  ins.bind(8, info.backend).bind(9, devices.dump());
  ins.bind(10, info.code_version.empty() ? std::string(LATHE_VERSION) : info.code_version);
  ins.bind(11, running ? std::optional<int64_t>(current_pid()) : std::nullopt);
  ins.bind(12, running ? std::optional<int64_t>(now) : std::nullopt);
  ins.run();
  const int64_t rid = m_db->last_insert_rowid();
  if (info.config.is_object()) {
    sql::Stmt p = m_db->prepare("INSERT OR REPLACE INTO params(run, key, value) VALUES(?, ?, ?)");
    for (const auto& [key, value] : flatten_config(info.config))
      p.bind(1, rid).bind(2, key).bind(3, value).run();
  }
  insert_event(*m_db, rid, "status", {{"to", status_name(status)}}, now);
  txn.commit();
  return id;
}

int Store::reap_stale_runs(int64_t stale_after_ms) {
  struct Stale {
    int64_t rid;
    RunRecord run;
    std::string reason;
  };
  std::vector<Stale> stale;
  const int64_t now = unix_ms();
  {
    sql::Stmt q = m_db->prepare(std::string("SELECT ") + kRunColumns + " FROM runs r WHERE r.status = 'running'");
    while (q.step()) {
      Stale s;
      s.run = read_run(q, &s.rid);
      s.reason = stale_reason(s.run, now, stale_after_ms);
      if (!s.reason.empty())
        stale.push_back(std::move(s));
    }
  }
  if (stale.empty())
    return 0;
  int marked = 0;
  sql::Txn txn(*m_db, sql::Txn::Kind::write);
  // Only if nothing changed since we looked (the writer may have beaten, or been resumed, meanwhile).
  sql::Stmt up = m_db->prepare(
      "UPDATE runs SET status = 'interrupted', finished_ms = coalesce(heartbeat_ms, started_ms, created_ms)"
      " WHERE rid = ?1 AND status = 'running' AND pid IS ?2 AND heartbeat_ms IS ?3");
  for (const Stale& s : stale) {
    up.bind(1, s.rid).bind(2, s.run.pid).bind(3, s.run.heartbeat_ms).run();
    if (m_db->changes() == 0)
      continue;
    insert_event(*m_db, s.rid, "status",
                 {{"from", "running"}, {"to", "interrupted"}, {"reason", s.reason}, {"detected_by", host_name()}}, now);
    ++marked;
  }
  txn.commit();
  return marked;
}

std::optional<RunRecord> Store::find_run(const std::string& id) const {
  sql::Stmt q = m_db->prepare(std::string("SELECT ") + kRunColumns + ", r.config FROM runs r WHERE r.id = ?");
  if (!q.bind(1, id).step())
    return std::nullopt;
  int64_t rid = 0;
  RunRecord r = read_run(q, &rid);
  r.config_json = q.col_text(13);
  fill_notes(*m_db, {rid}, {&r});
  return r;
}

RunRecord Store::run(const std::string& id) const {
  std::optional<RunRecord> r = find_run(id);
  if (!r)
    throw DataError("no run with id " + id + " in " + path());
  return *r;
}

int64_t Store::rid_of(const std::string& run_id) const {
  sql::Stmt q = m_db->prepare("SELECT rid FROM runs WHERE id = ?");
  if (!q.bind(1, run_id).step())
    throw DataError("no run with id " + run_id + " in " + path());
  return q.col_int(0);
}

std::string Store::resolve_run(const std::string& ref) const {
  if (ref.empty())
    throw DataError("empty run reference: give a run id, a unique id prefix or a run name");
  if (find_run(ref))
    return ref;
  sql::Stmt q = m_db->prepare(std::string("SELECT ") + kRunColumns +
                              " FROM runs r WHERE substr(r.id, 1, length(?1)) = ?1 OR r.name = ?1"
                              " ORDER BY r.created_ms DESC, r.rid DESC");
  q.bind(1, ref);
  std::vector<RunRecord> found;
  while (q.step())
    found.push_back(read_run(q));
  if (found.size() == 1)
    return found.front().id;
  if (found.empty())
    throw DataError("no run matches \"" + ref + "\" in " + path() +
                    ": give a run id, a unique id prefix or a run name (lathe-cli list shows them)");
  std::string msg = "\"" + ref + "\" matches " + std::to_string(found.size()) +
                    " runs; give more of the id. Candidates (newest first):";
  const size_t shown = std::min<size_t>(found.size(), 20);
  for (size_t i = 0; i < shown; ++i) {
    const RunRecord& r = found[i];
    msg += "\n  " + r.id + "  " + r.name + "  " + std::string(status_name(r.status)) + "  " +
           format_local_time(r.created_ms);
  }
  if (shown < found.size())
    msg += "\n  ... and " + std::to_string(found.size() - shown) + " more";
  throw DataError(msg);
}

RunPage Store::list_runs(const RunQuery& q) const {
  sql::Txn snapshot(*m_db, sql::Txn::Kind::read);  // page, total and summaries from one snapshot
  RunPage page;

  // Metric names and directions (a small table): resolve ids once, name summaries without a join.
  std::unordered_map<int64_t, std::pair<std::string, Direction>> keys;
  {
    sql::Stmt k = m_db->prepare("SELECT id, name, direction FROM metric_keys");
    while (k.step())
      keys.emplace(k.col_int(0),
                   std::make_pair(k.col_text(1), k.col_int(2) < 0 ? Direction::minimize : Direction::maximize));
  }
  const auto id_of = [&](const std::string& name) -> std::optional<std::pair<int64_t, Direction>> {
    for (const auto& [id, kd] : keys)
      if (kd.first == name)
        return std::make_pair(id, kd.second);
    return std::nullopt;
  };

  SqlBuilder where;
  where.add(" WHERE 1");
  if (!q.statuses.empty()) {
    where.add(" AND r.status IN (");
    for (size_t i = 0; i < q.statuses.size(); ++i) {
      where.add(i ? ",?" : "?");
      where.arg(std::string(status_name(q.statuses[i])));
    }
    where.add(")");
  }
  if (!q.name_glob.empty()) {
    where.add(" AND r.name GLOB ?");
    where.arg(q.name_glob);
  }
  for (const auto& [key, value] : q.params) {
    where.add(" AND r.rid IN (SELECT run FROM params WHERE key = ? AND value = ?)");
    where.arg(key);
    where.arg(value);
  }
  for (const std::string& tag : q.tags) {
    where.add(" AND r.rid IN (SELECT run FROM run_tags WHERE tag = ?)");
    where.arg(tag);
  }
  if (!q.sweep.empty()) {
    where.add(" AND r.id IN (SELECT run_id FROM sweep_members WHERE sweep = ?)");
    where.arg(q.sweep);
  }
  if (!q.search.empty()) {
    // instr on lower(): a plain substring (LIKE would treat % and _ in the text as wildcards).
    where.add(
        " AND (instr(lower(r.id), lower(?)) > 0 OR instr(lower(r.name), lower(?)) > 0 OR"
        " instr(lower(r.note), lower(?)) > 0 OR r.rid IN (SELECT run FROM run_tags WHERE instr(lower(tag), lower(?)) > "
        "0))");
    for (int i = 0; i < 4; ++i)
      where.arg(q.search);
  }

  {
    SqlBuilder count = where;
    count.text = "SELECT count(*) FROM runs r" + where.text;
    sql::Stmt c = count.prepare(*m_db);
    page.total = c.step() ? c.col_int(0) : 0;
  }

  // Which summaries to return.
  std::unordered_map<int64_t, bool> wanted;  // empty: all
  for (const std::string& name : q.with_metrics)
    if (const auto key = id_of(name))
      wanted.emplace(key->first, true);
  if (!q.with_metrics.empty() && wanted.empty())
    wanted.emplace(-1, true);  // none of them exists

  using Sort = RunQuery::Sort;
  SqlBuilder list;
  list.add("SELECT r.rid FROM runs r");
  std::string order;
  bool desc = false;
  if (q.sort == Sort::metric_last || q.sort == Sort::metric_best) {
    const auto key = id_of(q.sort_metric);
    const Direction dir = key ? key->second : default_direction(q.sort_metric);
    list.add(" LEFT JOIN metric_summary s ON s.run = r.rid AND s.metric = ?");
    list.arg(key ? key->first : int64_t{-1});
    order = q.sort == Sort::metric_last ? "s.last_value" : (dir == Direction::minimize ? "s.min_value" : "s.max_value");
    desc = dir == Direction::maximize;  // best first
  } else if (q.sort == Sort::name || q.sort == Sort::status) {
    order = q.sort == Sort::name ? "r.name" : "r.status";
  } else {
    order = q.sort == Sort::started ? "r.started_ms" : "r.created_ms";
    desc = true;
  }
  if (q.descending)
    desc = *q.descending;
  list.text += where.text;
  list.args.insert(list.args.end(), where.args.begin(), where.args.end());
  list.add(" ORDER BY " + order + (desc ? " DESC" : " ASC") + " NULLS LAST, r.rid DESC LIMIT ? OFFSET ?");
  list.arg(q.limit > 0 ? q.limit : int64_t{-1});
  list.arg(std::max<int64_t>(q.offset, 0));

  // Two steps: sort only the rids (a sorter carrying whole rows with their summary packs costs
  // more than fetching the page's rows by key afterwards).
  std::vector<int64_t> rids;
  std::unordered_map<int64_t, size_t> position;
  std::string rid_list = "[";
  {
    sql::Stmt s = list.prepare(*m_db);
    while (s.step()) {
      position.emplace(s.col_int(0), rids.size());
      if (!rids.empty())
        rid_list += ',';
      rid_list += std::to_string(s.col_int(0));
      rids.push_back(s.col_int(0));
    }
  }
  rid_list += ']';
  page.runs.resize(rids.size());
  sql::Stmt s = m_db->prepare(std::string("SELECT ") + kRunColumns +
                              ", r.summary_pack FROM json_each(?1) j CROSS JOIN runs r ON r.rid = j.value");
  s.bind(1, rid_list);
  while (s.step()) {
    RunListItem& item = page.runs[position.at(s.col_int(0))];
    item.run = read_run(s);
    // Summaries come from the run's packed copy of metric_summary: one row per run, not per metric.
    for (const auto& [metric, agg] : unpack_summaries(s.col_blob(13))) {
      if (!wanted.empty() && !wanted.count(metric))
        continue;
      const auto key = keys.find(metric);
      if (key == keys.end())
        continue;
      item.metrics.push_back(to_summary(key->second.first, key->second.second, agg));
    }
    const auto by_name = [](const MetricSummary& a, const MetricSummary& b) { return a.metric < b.metric; };
    if (!std::is_sorted(item.metrics.begin(), item.metrics.end(), by_name))  // packs are written sorted
      std::sort(item.metrics.begin(), item.metrics.end(), by_name);
  }
  std::vector<RunRecord*> records;
  for (RunListItem& item : page.runs)
    records.push_back(&item.run);
  fill_notes(*m_db, rids, records);
  return page;
}

std::vector<std::pair<std::string, std::string>> Store::params(const std::string& run_id) const {
  const int64_t rid = rid_of(run_id);
  sql::Stmt q = m_db->prepare("SELECT key, value FROM params WHERE run = ? ORDER BY key");
  q.bind(1, rid);
  std::vector<std::pair<std::string, std::string>> out;
  while (q.step())
    out.emplace_back(q.col_text(0), q.col_text(1));
  return out;
}

ConfigDiff Store::diff_configs(const std::vector<std::string>& run_ids) const {
  ConfigDiff diff;
  diff.run_ids = run_ids;
  std::vector<std::map<std::string, std::string>> per_run;
  std::set<std::string> keys;
  for (const std::string& id : run_ids) {
    std::map<std::string, std::string> m;
    for (auto& [k, v] : params(id)) {
      keys.insert(k);
      m.emplace(std::move(k), std::move(v));
    }
    per_run.push_back(std::move(m));
  }
  for (const std::string& key : keys) {
    ConfigDiff::Row row{key, {}};
    bool all_same = true;
    for (const auto& m : per_run) {
      const auto it = m.find(key);
      row.values.push_back(it == m.end() ? std::nullopt : std::optional<std::string>(it->second));
      if (row.values.back() != row.values.front())
        all_same = false;
    }
    if (all_same)
      ++diff.same;
    else
      diff.differing.push_back(std::move(row));
  }
  return diff;
}

DeleteResult Store::delete_run(const std::string& run_id, bool delete_files) {
  DeleteResult result;
  RunFileFacts facts;
  facts.run_id = run_id;
  facts.store_dir = fs::absolute(path()).parent_path().string();
  {
    sql::Txn txn(*m_db, sql::Txn::Kind::write);
    int64_t rid = 0;
    sql::Stmt q = m_db->prepare(std::string("SELECT ") + kRunColumns + " FROM runs r WHERE r.id = ?");
    if (!q.bind(1, run_id).step())
      throw DataError("no run with id " + run_id + " in " + path());
    const RunRecord r = read_run(q, &rid);
    q.reset();
    if (r.status == RunStatus::running && stale_reason(r, unix_ms(), kDefaultStaleAfterMs).empty())
      throw DataError("run " + run_id + " is still running (writer pid " + std::to_string(r.pid.value_or(0)) + " on " +
                      r.host + "): stop it first (Ctrl-C where it runs, or kill -INT " +
                      std::to_string(r.pid.value_or(0)) + " on " + r.host +
                      ": it ends `cancelled` with a checkpoint), then delete it");
    sql::Stmt cfg = m_db->prepare("SELECT config FROM runs WHERE rid = ?");
    if (cfg.bind(1, rid).step())
      facts.config = nlohmann::json::parse(cfg.col_text(0), nullptr, false);
    facts.artifacts = artifacts(run_id);
    sql::Stmt started =
        m_db->prepare("SELECT fields FROM events WHERE run = ? AND kind = 'started' ORDER BY id LIMIT 1");
    if (started.bind(1, rid).step()) {
      const nlohmann::json f = nlohmann::json::parse(started.col_text(0), nullptr, false);
      if (f.is_object() && f.contains("run_dir") && f["run_dir"].is_string())
        facts.recorded_dir = f["run_dir"].get<std::string>();
    }
    for (const char* table :
         {"samples", "sample_blocks", "metric_summary", "params", "events", "artifacts", "telemetry", "run_tags"}) {
      sql::Stmt d = m_db->prepare(std::string("DELETE FROM ") + table + " WHERE run = ?");
      d.bind(1, rid).run();
      if (std::string_view(table) == "samples")
        result.samples = m_db->changes();
    }
    sql::Stmt d = m_db->prepare("DELETE FROM runs WHERE rid = ?");
    d.bind(1, rid).run();
    txn.commit();
  }
  if (delete_files)
    delete_run_files(facts, result);
  return result;
}

}  // namespace lathe
