// libFuzzer target: arbitrary bytes as a run store: Store::open (schema check, migration, stale-run
// reaping), read-only then read-write, and when it opens, listing its runs and reading the first few,
// as `lathe-cli list` / `show` do.
#include <filesystem>

#include "engine/store/store.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path dir = lathe::fuzz::scratch_dir();
  for (const char* side : {"store.db-wal", "store.db-shm", "store.db-journal"})
    std::filesystem::remove(dir / side);
  const std::string path = lathe::fuzz::input_file(data, size, "store.db");
  for (bool read_only : {true, false}) {
    lathe::fuzz::refuse_only_with_lathe_errors([&] {
      lathe::Store::OpenOptions options;
      options.busy_timeout_ms = 0;
      options.read_only = read_only;  // list/show/export open read-only; run and delete read-write
      lathe::Store store = lathe::Store::open(path, options);
      const lathe::RunPage page = store.list_runs();
      for (size_t i = 0; i < page.runs.size() && i < 4; ++i) {
        const std::string& id = page.runs[i].run.id;
        store.summaries(id);
        store.params(id);
        store.events(id);
      }
    });
  }
  return 0;
}
