// The instance price catalog (resources/prices.json) and the cost of a run on an instance.
// Prices are per instance-hour (all of the instance's GPUs together), with the date and source of
// each number, so a report can say where its dollars come from.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace lathe {

/// An older figure for an instance's price, kept beside today's so a user sees that prices move.
struct PastPrice {
  std::string date;                    ///< when it was read ("YYYY-MM") or where it is undated
  double on_demand_usd_per_hour = -1;  ///< -1: not given
  double spot_usd_per_hour = -1;       ///< -1: not given
  std::string source;
};

/// One priced machine type. Prices are for the whole instance, per hour, in USD.
struct InstancePrice {
  std::string name;       ///< "p4d.24xlarge", "local", ...
  int gpus = 0;           ///< GPUs per instance; 0 = CPU only / unknown ("local")
  std::string gpu_model;  ///< "NVIDIA A100-SXM4-40GB"; empty when gpus == 0
  /// The CUDA device name of its GPU, as a run on it reads it ("NVIDIA H100 80GB HBM3" for an H100
  /// SXM5); "" where the catalog gives none.
  std::string gpu_cuda_name;
  double on_demand_usd_per_hour = 0;
  double spot_usd_per_hour = 0;
  std::string price_date;   ///< when the prices were read, "YYYY-MM" or "YYYY-MM-DD"
  std::string source;       ///< where the on-demand price comes from
  std::string spot_source;  ///< where the spot price comes from (spot prices move; this says how it was taken)
  /// Peak dense FLOP/s of ONE device per precision ("fp32", "tf32", "bf16", "fp16"), for MFU.
  /// Empty when unknown.
  std::map<std::string, double> peak_flops_per_device;
  std::string peak_flops_source;
  std::vector<PastPrice> history;  ///< older figures where they differ from today's

  double usd_per_hour(bool spot) const { return spot ? spot_usd_per_hour : on_demand_usd_per_hour; }
  /// Peak FLOP/s of one device at `precision`, or 0 when the catalog does not know it.
  double peak_flops(const std::string& precision) const;
};

class PriceCatalog {
 public:
  /// Reads a catalog: {"version": 1, "currency": "USD", "instances": [{...}, ...]}.
  /// Throws DataError naming the file and the entry when something is missing or malformed.
  static PriceCatalog load(const std::string& path);
  /// $LATHE_PRICES when set and non-empty, else LATHE_SOURCE_DIR "/resources/prices.json".
  static std::string default_path();

  /// Throws ConfigError naming the unknown instance and listing the catalog's names.
  const InstancePrice& find(const std::string& name) const;
  bool contains(const std::string& name) const;
  /// Instance names in catalog order.
  std::vector<std::string> names() const;
  const std::vector<InstancePrice>& instances() const { return m_instances; }
  const std::string& path() const { return m_path; }

 private:
  std::vector<InstancePrice> m_instances;
  std::string m_path;
};

/// Dollars for `elapsed_seconds` of `devices` ranks on `instance`.
/// An instance has `gpus` GPUs, so `devices` ranks need ceil(devices / gpus) instances and
/// cost = price_per_hour * ceil(devices / gpus) * elapsed_seconds / 3600. Instances with no GPUs
/// (gpus == 0, e.g. "local") are one instance whatever `devices` is. Throws lathe::Error when
/// devices < 1 or elapsed_seconds < 0.
double cost_usd(const InstancePrice& instance, bool spot, int devices, double elapsed_seconds);

/// Instances needed for `devices` ranks (see cost_usd).
int instances_needed(const InstancePrice& instance, int devices);

/// A run's cost is its wall time here times the instance's price. When the instance is priced and
/// has GPUs the run did not train on, that is a projection, not what the run cost: returns why,
/// naming both; "" when the run's device is the instance's (or the instance has no price or GPUs).
/// The run's GPU is the instance's when its CUDA name (a MIG slice's board name) is the catalog's
/// `gpu_cuda_name`, whole and case-insensitive, so an H100 PCIe is not taken for a p5's H100 SXM5;
/// for an entry without one, when the name holds the model's short name ("H100" of
/// "NVIDIA H100-SXM5-80GB").
std::string cost_projection_reason(const InstancePrice& instance, const std::string& device_name, bool on_gpu);

}  // namespace lathe
