// The GPU datasheet table (resources/device_peaks.json): each device model's dense peak per data
// type with its source, found by the CUDA device name, and the choice of the peak a GPU run's MFU is
// measured against (the data type its matmuls run at; the price catalog's instance peak only for a
// device the table does not know).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/run/cost_model.h"
#include "engine/run/telemetry.h"

namespace lathe {

/// One device model's datasheet peaks.
struct DevicePeaks {
  std::string model;                    ///< "NVIDIA H200 SXM 141GB"
  std::vector<std::string> cuda_names;  ///< the CUDA device names that are this model ("NVIDIA H200")
  /// Dense peak ops/s of one device per data type: "fp32", "tf32", "bf16", "fp16", "int8".
  std::map<std::string, double> peak_per_s;
  std::string source;  ///< the datasheet, and how a figure was read from it
  /// The board's streaming multiprocessors (its datasheet or whitepaper); 0 where the table gives
  /// none. A MIG slice's peak is the board's x the slice's SMs / these (same clocks, fewer SMs).
  int sms = 0;

  /// Peak ops/s at `key`, or 0 when the datasheet gives none.
  double peak(const std::string& key) const;
};

class DevicePeakTable {
 public:
  /// Reads {"version": 1, "devices": [{"model", "cuda_names", "peak_tflops", "source"}, ...]}.
  /// Throws DataError naming the file and the entry when something is missing or malformed (a CUDA
  /// name listed twice, a peak key other than fp32/tf32/bf16/fp16/int8, a peak <= 0).
  static DevicePeakTable load(const std::string& path);
  /// $LATHE_DEVICE_PEAKS when set and non-empty, else LATHE_SOURCE_DIR "/resources/device_peaks.json".
  static std::string default_path();

  /// The entry whose cuda_names hold `cuda_name` (whole name, case-insensitive, surrounding spaces
  /// ignored), or nullptr.
  const DevicePeaks* find(const std::string& cuda_name) const;
  const std::vector<DevicePeaks>& devices() const { return m_devices; }
  const std::string& path() const { return m_path; }

 private:
  std::vector<DevicePeaks> m_devices;
  std::string m_path;
};

/// Whether two CUDA device names are the same device model: whole names, case-insensitive,
/// surrounding blanks ignored ("NVIDIA H200 NVL" is not "NVIDIA H200").
bool same_cuda_name(const std::string& a, const std::string& b);

/// A CUDA device name of a MIG slice, "<board name> MIG <profile>" ("NVIDIA A100-SXM4-40GB MIG
/// 1g.5gb", "NVIDIA H100 80GB HBM3 MIG 3g.40gb"), split in the two; nullopt for any other name.
struct MigName {
  std::string board;    ///< "NVIDIA A100-SXM4-40GB"
  std::string profile;  ///< "1g.5gb"
};
std::optional<MigName> parse_mig_name(const std::string& cuda_name);

/// The datasheet peaks of the device `device_name` (a CUDA name): its table entry; for a MIG slice
/// of a board the table lists with its SM count, the board's entry with every peak x `device_sms` /
/// the board's SMs and the model "<board model>, MIG <profile> slice (<n> of <m> SMs)"; else nullopt,
/// and `why` (when given) says what is missing. bench/gpu reads its rows against these.
std::optional<DevicePeaks> device_peaks(const DevicePeakTable& table, const std::string& device_name, int device_sms,
                                        std::string* why = nullptr);

/// The table's key for a run computing at `compute`: f32 -> "fp32" ("tf32" when `tf32`), bf16 ->
/// "bf16", f16 -> "fp16", s8 -> "int8". Throws for other types.
std::string peak_key(DType compute, bool tf32);

/// The table's key for a started event's `peak_flops_dtype` ("f32", "tf32", "bf16", "f16", "s8";
/// "" in runs recorded before the field, which were f32). Throws for other names.
std::string peak_key(const std::string& peak_flops_dtype);

/// The peak a GPU run's device/mfu is against, and the data type it is for.
struct PeakChoice {
  PeakFlops peak;     ///< flops_per_s 0: unknown (device/mfu is not reported); `how` says why
  std::string dtype;  ///< the started event's peak_flops_dtype: "f32", "tf32", "bf16", "f16", "s8"
};

/// A GPU run on `device_name` whose matmuls compute at `compute` (f32 when the backend emulates a
/// lower precision: the arithmetic is then f32's; `tf32` when f32 GEMMs use TF32 tensor cores): the
/// device's datasheet peak for that type from `table`. A MIG slice of a board the table knows gets
/// the board's peak x `device_sms` (the slice's SMs, Backend::multiprocessors) / the board's `sms`,
/// or no peak when either count is unknown (never the whole board's: that would understate its MFU
/// up to 8x). When the table does not know the device, `instance`'s catalog peak for the type (a
/// price entry's GPU, which need not be this one: `how` says so); else unknown.
PeakChoice choose_gpu_peak(const DevicePeakTable& table, const std::string& device_name, DType compute, bool tf32,
                           const InstancePrice& instance, int device_sms = 0);

}  // namespace lathe
