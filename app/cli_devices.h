// `lathe-cli devices [--json]`: what a data-parallel run (compute.devices) could use on this
// machine: its GPUs through NVML (loaded at run time, engine/run/nvml.h), or, when there are none,
// the CPU ranks its cores allow. The designer shows the same list and caps compute.devices by it.
#pragma once

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace lathe::cli {

/// {"kind": "gpu"|"cpu", "gpus": [{"index", "name", "memory_bytes"}], "cpu": {"cores",
/// "threads_per_rank"}, "max_devices", "why_no_gpu" (cpu only)}. max_devices: the GPU count, or
/// min(64, cores) CPU ranks (threads_per_rank = cores / max_devices, at least 1).
nlohmann::json devices_json();
/// The CPU answer for `cores` cores (devices_json() when NVML sees no GPU).
nlohmann::json cpu_devices_json(int cores, const std::string& why_no_gpu);
/// One line per device, for people.
std::string devices_text(const nlohmann::json& devices);
void add_devices_command(CLI::App& app, int& exit_code);

}  // namespace lathe::cli
