// Notes and tags on runs (schema v5: runs.note, run_tags): what a user writes about a run so that
// a study of hundreds stays findable. Set by `lathe-cli note/tag` and the run browser; searched and
// filtered by list_runs (RunQuery::tags, RunQuery::search).
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "engine/store/store_sql.h"

namespace lathe {

namespace {

constexpr size_t kMaxNote = 64 * 1024;
constexpr size_t kMaxTag = 64;

void check_tag(const std::string& tag) {
  const auto bad = [&](const std::string& why) {
    throw ConfigError("tag '" + tag + "': " + why +
                      "; allowed: 1 to 64 characters without whitespace, commas or control characters");
  };
  if (tag.empty())
    bad("empty");
  if (tag.size() > kMaxTag)
    bad("longer than 64 characters");
  for (unsigned char c : tag)
    if (c <= 0x20 || c == 0x7f || c == ',')
      bad("has whitespace, a comma or a control character");
}

int64_t rid_for(sql::Db& db, const std::string& run_id) {
  sql::Stmt q = db.prepare("SELECT rid FROM runs WHERE id = ?");
  if (!q.bind(1, run_id).step())
    throw DataError("no run with id " + run_id + " in " + db.path());
  return q.col_int(0);
}

}  // namespace

namespace store_detail {

void fill_notes(sql::Db& db, const std::vector<int64_t>& rids, const std::vector<RunRecord*>& records) {
  if (rids.empty())
    return;
  std::unordered_map<int64_t, RunRecord*> by_rid;
  std::string list = "[";
  for (size_t i = 0; i < rids.size() && i < records.size(); ++i) {
    by_rid[rids[i]] = records[i];
    if (i)
      list += ',';
    list += std::to_string(rids[i]);
  }
  list += "]";
  sql::Stmt n = db.prepare("SELECT r.rid, r.note FROM json_each(?1) j CROSS JOIN runs r ON r.rid = j.value");
  n.bind(1, list);
  while (n.step())
    by_rid.at(n.col_int(0))->note = n.col_text(1);
  sql::Stmt t = db.prepare(
      "SELECT t.run, t.tag FROM json_each(?1) j CROSS JOIN run_tags t ON t.run = j.value ORDER BY t.run, t.tag");
  t.bind(1, list);
  while (t.step())
    by_rid.at(t.col_int(0))->tags.push_back(t.col_text(1));
}

}  // namespace store_detail

void Store::set_note(const std::string& run_id, const std::string& text) {
  if (text.size() > kMaxNote)
    throw ConfigError("note: " + std::to_string(text.size()) + " bytes; allowed: at most 65536");
  sql::Txn txn(*m_db, sql::Txn::Kind::write);
  const int64_t rid = rid_for(*m_db, run_id);
  m_db->prepare("UPDATE runs SET note = ? WHERE rid = ?").bind(1, text).bind(2, rid).run();
  txn.commit();
}

void Store::add_tags(const std::string& run_id, const std::vector<std::string>& tags) {
  for (const std::string& t : tags)
    check_tag(t);
  sql::Txn txn(*m_db, sql::Txn::Kind::write);
  const int64_t rid = rid_for(*m_db, run_id);
  sql::Stmt ins = m_db->prepare("INSERT OR IGNORE INTO run_tags(run, tag) VALUES(?, ?)");
  for (const std::string& t : tags) {
    ins.bind(1, rid).bind(2, t).run();
    ins.reset();
  }
  txn.commit();
}

void Store::remove_tags(const std::string& run_id, const std::vector<std::string>& tags) {
  sql::Txn txn(*m_db, sql::Txn::Kind::write);
  const int64_t rid = rid_for(*m_db, run_id);
  sql::Stmt del = m_db->prepare("DELETE FROM run_tags WHERE run = ? AND tag = ?");
  for (const std::string& t : tags) {
    del.bind(1, rid).bind(2, t).run();
    del.reset();
  }
  txn.commit();
}

std::vector<std::pair<std::string, int64_t>> Store::all_tags() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (sql::Stmt q = m_db->prepare("SELECT tag, count(*) FROM run_tags GROUP BY tag ORDER BY tag"); q.step();)
    out.emplace_back(q.col_text(0), q.col_int(1));
  return out;
}

}  // namespace lathe
