// best_recorded_peak_flops (see cli_peak.h): one pass over the store's started events and notes.
#include "app/cli_peak.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"

namespace lathe::cli {

double best_recorded_peak_flops(const std::string& db, const std::string& cpu_model, int threads) {
  if (db.empty() || !std::filesystem::exists(db))
    return 0;
  Store store = Store::open(db, Store::read_only_options());
  // Runs of several ranks: before the notes said "world_size", their achieved rate was every
  // rank's together (above any one rank's peak), so such a note is not a peak.
  std::set<int64_t> multi_rank;
  {
    sql::Stmt p = store.db().prepare("SELECT run FROM params WHERE key = 'compute.devices' AND value <> '1'");
    while (p.step())
      multi_rank.insert(p.col_int(0));
  }
  sql::Stmt q = store.db().prepare(
      "SELECT run, kind, fields FROM events WHERE kind = 'started' OR (kind = 'note' AND fields LIKE "
      "'%mfu_peak_raised%') ORDER BY id");
  std::map<int64_t, bool> same_machine;  // run -> started on this CPU model with this thread count, f32 peak
  double best = 0;
  while (q.step()) {
    const nlohmann::json f = nlohmann::json::parse(q.col_text(2), nullptr, false);
    if (!f.is_object())
      continue;
    const int64_t run = q.col_int(0);
    const auto number = [&](const char* key) {
      return f.contains(key) && f[key].is_number() ? f[key].get<double>() : 0;
    };
    if (q.col_text(1) == "started") {
      // A bf16 run's peak is its bf16 matmul rate, several times the f32 one (no dtype: an f32 run
      // from before the field existed).
      const bool f32 = f.value("peak_flops_dtype", std::string("f32")) == "f32";
      const bool same = f32 && f.value("device", std::string()) == cpu_model && f.contains("threads") &&
                        f["threads"].is_number_integer() && f["threads"].get<int>() == threads;
      same_machine[run] = same;
      if (same && f.value("peak_flops_how", std::string()).rfind("measured", 0) == 0)
        best = std::max(best, number("peak_flops_per_s"));
    } else if (same_machine[run] && f.value("kind", std::string()) == "mfu_peak_raised" &&
               (f.contains("world_size") || !multi_rank.count(run))) {
      best = std::max(best, number("achieved_flops_per_s"));
    }
  }
  return best;
}

}  // namespace lathe::cli
