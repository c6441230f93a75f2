// libFuzzer target: `--set key.path=value` overrides, one per input line (at most 16), applied to a
// valid config, then validated and parsed, as `lathe-cli run CONFIG --set ...` does.
#include "engine/run/config.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json base = nlohmann::json::parse(
      R"({"name": "fuzz", "train": {"epochs": 1, "batch_size": 32}, "data": {"train_subset": 64}})");
  const std::string text(reinterpret_cast<const char*>(data), size);
  lathe::fuzz::refuse_only_with_lathe_errors([&] {
    nlohmann::json cfg = base;
    size_t start = 0;
    for (int line = 0; line < 16 && start <= text.size(); ++line) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos)
        end = text.size();
      lathe::apply_override(cfg, text.substr(start, end - start));
      start = end + 1;
    }
    lathe::parse_experiment(lathe::validate_config(cfg));
  });
  return 0;
}
