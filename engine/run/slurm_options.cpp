// Slurm resources of a sweep (see slurm_options.h): checking and the lathe-cli options.
#include "engine/run/slurm_options.h"

#include <cctype>

#include "engine/core/error.h"

namespace lathe {

namespace {

bool all_digits(const std::string& s) {
  if (s.empty() || s.size() > 9)
    return false;
  for (unsigned char c : s)
    if (!std::isdigit(c))
      return false;
  return true;
}

/// "a:b:c" -> {"a","b","c"} (empty parts kept, so "1::2" fails all_digits).
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s)
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  return out;
}

bool all_numbers(const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    if (!all_digits(p))
      return false;
  return true;
}

/// A value that goes on an #SBATCH line: no whitespace, quotes, backslashes or control characters.
bool sbatch_safe(const std::string& v) {
  for (unsigned char c : v)
    if (c <= 0x20 || c == '\'' || c == '"' || c == '\\' || c == 0x7f)
      return false;
  return true;
}

}  // namespace

bool is_slurm_time(const std::string& t) {
  if (t == "INFINITE" || t == "UNLIMITED" || t == "infinite" || t == "unlimited")
    return true;
  const size_t dash = t.find('-');
  if (dash == std::string::npos) {  // M, M:S, H:M:S
    const std::vector<std::string> parts = split(t, ':');
    return parts.size() <= 3 && all_numbers(parts);
  }
  if (!all_digits(t.substr(0, dash)))  // D-H, D-H:M, D-H:M:S
    return false;
  const std::vector<std::string> parts = split(t.substr(dash + 1), ':');
  return parts.size() <= 3 && all_numbers(parts);
}

void check_slurm_resources(const SlurmResources& r) {
  if (r.out.empty())
    throw ConfigError("--out: missing; allowed: a folder every Slurm node can write (shared file system)");
  if (!sbatch_safe(r.out))
    throw ConfigError("--out '" + r.out + "': allowed: a folder path without whitespace or quotes");
  if (!sbatch_safe(r.partition))
    throw ConfigError("--partition '" + r.partition + "': allowed: a Slurm partition name without whitespace or quotes");
  if (!r.time.empty() && !is_slurm_time(r.time))
    throw ConfigError("--time '" + r.time +
                      "': allowed: Slurm's time limit, minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S or UNLIMITED "
                      "(e.g. 30, 45:00, 2:00:00, 1-12)");
  if (r.gpus < -1 || r.gpus > kMaxSlurmGpus)
    throw ConfigError("--gpus " + std::to_string(r.gpus) + ": allowed: 0 to " + std::to_string(kMaxSlurmGpus) +
                      " GPUs per run (leave it out: compute.devices on cuda, else 0)");
  if (r.cpus < -1 || r.cpus == 0 || r.cpus > kMaxSlurmCpus)
    throw ConfigError("--cpus " + std::to_string(r.cpus) + ": allowed: 1 to " + std::to_string(kMaxSlurmCpus) +
                      " CPUs per run (leave it out: train.threads when set, else Slurm's default)");
}

std::vector<std::string> slurm_cli_args(const SlurmResources& r) {
  std::vector<std::string> a = {"--slurm", "--out", r.out};
  if (!r.partition.empty())
    a.insert(a.end(), {"--partition", r.partition});
  if (!r.time.empty())
    a.insert(a.end(), {"--time", r.time});
  if (r.gpus >= 0)
    a.insert(a.end(), {"--gpus", std::to_string(r.gpus)});
  if (r.cpus >= 0)
    a.insert(a.end(), {"--cpus", std::to_string(r.cpus)});
  return a;
}

}  // namespace lathe
