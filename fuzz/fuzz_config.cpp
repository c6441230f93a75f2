// libFuzzer target: an experiment config file's text through load_config_file -> validate_config
// -> parse_experiment -> flatten_config, as `lathe-cli run CONFIG` reads it.
#include "engine/run/config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lathe::fuzz::input_file(data, size, "config.json");
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    const nlohmann::json validated = lathe::validate_config(lathe::load_config_file(path));
    lathe::parse_experiment(validated);
    lathe::flatten_config(validated);
  });
  return 0;
}
