// `lathe-cli devices` (see cli_devices.h).
#include "app/cli_devices.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

#include "engine/run/nvml.h"

namespace lathe::cli {

constexpr int kMaxDevices = 64;  // compute.devices' schema maximum

nlohmann::json cpu_devices_json(int cores, const std::string& why_no_gpu) {
  cores = std::max(1, cores);
  const int ranks = std::min(kMaxDevices, cores);
  nlohmann::json out{{"kind", "cpu"},
                     {"gpus", nlohmann::json::array()},
                     {"cpu", {{"cores", cores}, {"threads_per_rank", std::max(1, cores / ranks)}}},
                     {"max_devices", ranks}};
  if (!why_no_gpu.empty())
    out["why_no_gpu"] = why_no_gpu;
  return out;
}

nlohmann::json devices_json() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  Nvml& nvml = Nvml::instance();
  const int count = nvml.available() ? nvml.device_count() : 0;
  if (count <= 0)
    return cpu_devices_json(cores, nvml.available() ? "NVML sees no GPU" : nvml.why_unavailable());
  nlohmann::json gpus = nlohmann::json::array();
  for (int i = 0; i < count; ++i) {
    const auto s = nvml.sample(i);
    gpus.push_back({{"index", i}, {"name", nvml.device_name(i)}, {"memory_bytes", s ? s->mem_total_bytes : 0}});
  }
  return {{"kind", "gpu"},
          {"gpus", gpus},
          {"cpu", {{"cores", std::max(1, cores)}, {"threads_per_rank", std::max(1, cores / count)}}},
          {"max_devices", std::min(kMaxDevices, count)}};
}

std::string devices_text(const nlohmann::json& d) {
  std::ostringstream out;
  if (d.value("kind", "") == "gpu") {
    for (const auto& g : d["gpus"])
      out << "GPU " << g.value("index", 0) << ": " << g.value("name", "") << ", "
          << g.value("memory_bytes", uint64_t{0}) / (1024 * 1024) << " MiB\n";
  } else {
    out << "no GPU (" << d.value("why_no_gpu", "") << ")\n";
    out << "CPU ranks: " << d["cpu"].value("cores", 1) << " cores, " << d["cpu"].value("threads_per_rank", 1)
        << " threads each at " << d.value("max_devices", 1) << " ranks\n";
  }
  out << "compute.devices: 1.." << d.value("max_devices", 1) << "\n";
  return out.str();
}

void add_devices_command(CLI::App& app, int& exit_code) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("devices", "List the GPUs (or CPU ranks) a data-parallel run can use");
  cmd->add_flag("--json", *json, "Print the list as one JSON object");
  cmd->callback([json, &exit_code] {
    const nlohmann::json d = devices_json();
    if (*json)
      std::cout << d.dump(2) << "\n";
    else
      std::cout << devices_text(d);
    exit_code = 0;
  });
}

}  // namespace lathe::cli
