// lathe-cli import (see cli_import.h).
#include "app/cli_import.h"

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>

#include "engine/core/error.h"
#include "engine/store/store.h"
#include "engine/store/store_import.h"

namespace lathe::cli {

void add_import_command(CLI::App& app, const std::string& db_path, int& exit_code) {
  auto path = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "import", "Merge the runs and samples of another store file, or of every *.db under a folder, into --db");
  cmd->add_option("source", *path, "A store file or a folder of them (a Slurm sweep's --out)")->required();
  cmd->add_flag("--json", *json, "Print the counts as JSON");
  cmd->callback([&, path, json] {
    std::error_code ec;
    const bool folder = std::filesystem::is_directory(*path, ec);
    if (!folder && std::filesystem::exists(db_path, ec) && std::filesystem::equivalent(*path, db_path, ec))
      throw ConfigError("import " + *path + ": it is the store --db names; allowed: another store file, or a folder "
                        "of them");
    Store store = Store::open(db_path);
    const ImportResult r = import_stores(store, *path);
    if (*json) {
      std::cout << nlohmann::json{{"files", r.files},
                                  {"runs_added", r.runs_added},
                                  {"runs_updated", r.runs_updated},
                                  {"samples_added", r.samples_added},
                                  {"events_added", r.events_added},
                                  {"skipped", r.skipped}}
                       .dump()
                << "\n";
    } else {
      std::printf("imported %d file(s) into %s: %d new run(s), %d updated, %lld new sample(s), %lld new event(s)\n",
                  r.files, store.path().c_str(), r.runs_added, r.runs_updated,
                  static_cast<long long>(r.samples_added), static_cast<long long>(r.events_added));
      for (const std::string& s : r.skipped)
        std::fprintf(stderr, "lathe-cli: skipped %s\n", s.c_str());
      if (folder && r.files == 0 && r.skipped.empty())
        std::fprintf(stderr, "lathe-cli: no store files (*.db) in %s\n", path->c_str());
    }
    exit_code = 0;
  });
}

}  // namespace lathe::cli
