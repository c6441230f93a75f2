// Sweeps and their members in the store (see sweep_store.h).
#include "engine/store/sweep_store.h"

#include "engine/core/error.h"
#include "engine/run/run_dir.h"
#include "engine/store/process_info.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"

namespace lathe {

namespace {

MemberState parse_member_state(const std::string& s) {
  for (MemberState m : {MemberState::pending, MemberState::running, MemberState::finished, MemberState::failed,
                        MemberState::cancelled})
    if (member_state_name(m) == s)
      return m;
  throw DataError("sweep member state '" + s + "' is not one this lathe knows");
}

/// A member's state from its run's status (NULL: the run is gone or was never made).
const char* const kMemberStateSql = R"sql(
  CASE WHEN m.run_id = '' OR r.status IS NULL THEN 'pending'
       WHEN r.status = 'finished' THEN 'finished'
       WHEN r.status = 'failed' THEN 'failed'
       WHEN r.status IN ('cancelled', 'interrupted', 'incomplete') THEN 'cancelled'
       ELSE 'running' END)sql";

const char* const kSweepColumns =
    "s.id, s.name, s.definition, s.created_ms, s.status, s.slurm_job, s.folder,"
    " (SELECT count(*) FROM sweep_members m WHERE m.sweep = s.id),"
    " (SELECT count(*) FROM sweep_members m JOIN runs r ON r.id = m.run_id WHERE m.sweep = s.id AND"
    "  r.status = 'finished'),"
    " (SELECT count(*) FROM sweep_members m JOIN runs r ON r.id = m.run_id WHERE m.sweep = s.id AND"
    "  r.status IN ('failed', 'cancelled', 'interrupted', 'incomplete')),"
    " (SELECT count(*) FROM sweep_members m JOIN runs r ON r.id = m.run_id WHERE m.sweep = s.id AND"
    "  r.status IN ('queued', 'running'))";

SweepRecord read_sweep(sql::Stmt& q) {
  SweepRecord s;
  s.id = q.col_text(0);
  s.name = q.col_text(1);
  s.definition_json = q.col_text(2);
  s.created_ms = q.col_int(3);
  s.status = q.col_text(4);
  s.slurm_job = q.col_text(5);
  s.folder = q.col_text(6);
  s.total = static_cast<int>(q.col_int(7));
  s.finished = static_cast<int>(q.col_int(8));
  s.failed = static_cast<int>(q.col_int(9));
  s.running = static_cast<int>(q.col_int(10));
  return s;
}

}  // namespace

std::string_view member_state_name(MemberState s) {
  switch (s) {
    case MemberState::pending: return "pending";
    case MemberState::running: return "running";
    case MemberState::finished: return "finished";
    case MemberState::failed: return "failed";
    case MemberState::cancelled: return "cancelled";
  }
  return "pending";
}

std::string sweep_state(const SweepRecord& s) {
  if (s.total > 0 && s.finished == s.total)
    return "finished";
  if (s.running > 0)
    return "running";
  return s.status;
}

std::string create_sweep(Store& store, const std::string& name, const nlohmann::json& definition,
                         const std::vector<NewSweepMember>& members,
                         const std::function<std::string()>& draw_id) {
  if (members.empty())
    throw ConfigError("sweep " + name + ": no members; allowed: a definition that expands to one run or more");
  sql::Db& db = store.db();
  sql::Txn txn(db, sql::Txn::Kind::write);  // the id check and the insert see the same sweeps
  std::string id;
  sql::Stmt taken = db.prepare("SELECT 1 FROM sweeps WHERE id = ?");
  for (int attempt = 0; id.empty(); ++attempt) {
    if (attempt == 100)
      throw Error("sweep " + name + ": no free sweep id after 100 draws in " + store.path());
    const std::string candidate = draw_id ? draw_id() : make_run_id();
    taken.reset();
    if (!taken.bind(1, candidate).step())
      id = candidate;
  }
  db.prepare("INSERT INTO sweeps(id, name, definition, created_ms, status) VALUES(?, ?, ?, ?, 'pending')")
      .bind(1, id)
      .bind(2, name)
      .bind(3, definition.dump())
      .bind(4, store_detail::unix_ms())
      .run();
  sql::Stmt ins =
      db.prepare("INSERT INTO sweep_members(sweep, idx, name, config, state) VALUES(?, ?, ?, ?, 'pending')");
  for (size_t i = 0; i < members.size(); ++i) {
    ins.bind(1, id).bind(2, static_cast<int64_t>(i)).bind(3, members[i].name).bind(4, members[i].config.dump()).run();
    ins.reset();
  }
  txn.commit();
  return id;
}

std::vector<SweepRecord> list_sweeps(const Store& store) {
  std::vector<SweepRecord> out;
  sql::Txn snapshot(store.db(), sql::Txn::Kind::read);
  for (sql::Stmt q = store.db().prepare(std::string("SELECT ") + kSweepColumns +
                                        " FROM sweeps s ORDER BY s.created_ms DESC, s.id DESC");
       q.step();)
    out.push_back(read_sweep(q));
  return out;
}

SweepRecord find_sweep(const Store& store, const std::string& ref) {
  if (ref.empty())
    throw DataError("empty sweep reference: give a sweep id, a unique id prefix or a sweep name");
  sql::Stmt q = store.db().prepare(std::string("SELECT ") + kSweepColumns +
                                   " FROM sweeps s WHERE s.id = ?1 OR substr(s.id, 1, length(?1)) = ?1 OR s.name = ?1"
                                   " ORDER BY (s.id = ?1) DESC, s.created_ms DESC");
  q.bind(1, ref);
  std::vector<SweepRecord> found;
  while (q.step())
    found.push_back(read_sweep(q));
  if (!found.empty() && found.front().id == ref)
    return found.front();
  if (found.size() == 1)
    return found.front();
  if (found.empty())
    throw DataError("no sweep matches \"" + ref + "\" in " + store.path() +
                    ": give a sweep id, a unique id prefix or a sweep name (lathe-cli sweep --list shows them)");
  std::string msg = "\"" + ref + "\" matches " + std::to_string(found.size()) + " sweeps; give more of the id:";
  for (const SweepRecord& s : found)
    msg += "\n  " + s.id + "  " + s.name + "  " + s.status;
  throw DataError(msg);
}

std::vector<SweepMemberRecord> sweep_members(const Store& store, const std::string& sweep_id) {
  std::vector<SweepMemberRecord> out;
  sql::Stmt q = store.db().prepare(std::string("SELECT m.idx, m.name, m.config, m.run_id,") + kMemberStateSql +
                                   " FROM sweep_members m LEFT JOIN runs r ON r.id = m.run_id"
                                   " WHERE m.sweep = ? ORDER BY m.idx");
  q.bind(1, sweep_id);
  while (q.step()) {
    SweepMemberRecord m;
    m.index = static_cast<int>(q.col_int(0));
    m.name = q.col_text(1);
    m.config_json = q.col_text(2);
    m.run_id = q.col_text(3);
    m.state = parse_member_state(q.col_text(4));
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> sweep_run_ids(const Store& store, const std::string& sweep_id) {
  std::vector<std::string> out;
  sql::Stmt q = store.db().prepare("SELECT run_id FROM sweep_members WHERE sweep = ? AND run_id != '' ORDER BY idx");
  q.bind(1, sweep_id);
  while (q.step())
    out.push_back(q.col_text(0));
  return out;
}

std::string new_run_id(const Store& store) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string id = make_run_id();
    if (!store.find_run(id))
      return id;
  }
  throw Error("no free run id after 100 draws in " + store.path());
}

void set_sweep_member(Store& store, const std::string& sweep_id, int index, const std::string& run_id,
                      MemberState state) {
  sql::Stmt u = store.db().prepare("UPDATE sweep_members SET run_id = ?, state = ? WHERE sweep = ? AND idx = ?");
  u.bind(1, run_id).bind(2, member_state_name(state)).bind(3, sweep_id).bind(4, static_cast<int64_t>(index)).run();
  if (store.db().changes() != 1)
    throw DataError("sweep " + sweep_id + " has no member " + std::to_string(index));
}

void set_sweep_status(Store& store, const std::string& sweep_id, const std::string& status) {
  store.db().prepare("UPDATE sweeps SET status = ? WHERE id = ?").bind(1, status).bind(2, sweep_id).run();
  if (store.db().changes() != 1)
    throw DataError("no sweep " + sweep_id + " in " + store.path());
}

void set_sweep_slurm(Store& store, const std::string& sweep_id, const std::string& job_id, const std::string& folder) {
  store.db()
      .prepare("UPDATE sweeps SET slurm_job = ?, folder = ?, status = 'submitted' WHERE id = ?")
      .bind(1, job_id)
      .bind(2, folder)
      .bind(3, sweep_id)
      .run();
  if (store.db().changes() != 1)
    throw DataError("no sweep " + sweep_id + " in " + store.path());
}

}  // namespace lathe
