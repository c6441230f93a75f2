// `lathe-cli repair RUN`: one call of repair_run() and a one-line account of what it did.
#include "app/cli_repair.h"

#include <iostream>
#include <memory>

#include "app/cli_checks.h"
#include "engine/store/repair.h"

namespace lathe::cli {

namespace {

int cmd_repair(const std::string& db, const std::string& ref, const std::string& from, double wait_s, bool json) {
  Store store = Store::open(db);
  const std::string id = store.resolve_run(ref);
  RepairOptions opt;
  opt.metrics_file = from;
  opt.wait_ms = static_cast<int64_t>(wait_s * 1000);
  const RepairReport r = repair_run(store, id, opt);
  if (json) {
    std::cout << nlohmann::json{{"run", r.run_id},
                                {"metrics_file", r.metrics_file},
                                {"samples_in_file", r.samples_in_file},
                                {"reimported", r.inserted},
                                {"bad_lines", r.bad_lines},
                                {"status_before", std::string(status_name(r.status_before))},
                                {"status_after", std::string(status_name(r.status_after))}}
                     .dump()
              << "\n";
    return 0;
  }
  std::cout << "repaired " << r.run_id << ": re-imported " << r.inserted << " of " << r.samples_in_file
            << " samples from " << r.metrics_file << " (" << r.samples_in_file - r.inserted << " already in the store)";
  if (r.bad_lines > 0)
    std::cout << ", skipped " << r.bad_lines << " unreadable line(s)";
  if (r.status_after != r.status_before)
    std::cout << "; status " << status_name(r.status_before) << " -> " << status_name(r.status_after);
  else
    std::cout << "; status " << status_name(r.status_after);
  std::cout << "\n";
  return 0;
}

}  // namespace

void add_repair_command(CLI::App& app, const std::string& db_path, int& exit_code) {
  struct Args {
    std::string ref, from;
    double wait_s = 60;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* rep = app.add_subcommand(
      "repair", "Re-import a run's samples missing from the store from its metrics.jsonl, and restore its status");
  rep->add_option("run", a->ref, "Run id, unique id prefix or name")->required();
  rep->add_option("--from", a->from, "The metrics.jsonl to read (default: the one the run recorded)");
  rep->add_option("--wait", a->wait_s, "Seconds to wait for a store locked by another process")
      ->capture_default_str()
      ->check(kNonNegative);
  rep->add_flag("--json", a->json, "One JSON object instead of a sentence");
  rep->callback([&, a] { exit_code = cmd_repair(db_path, a->ref, a->from, a->wait_s, a->json); });
}

}  // namespace lathe::cli
