// Loads the GPU datasheet table and picks a GPU run's MFU peak: the device's own datasheet figure
// for the data type its matmuls run at, else the price catalog's instance peak, else none.
#include "engine/run/device_peaks.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/run/json_resource.h"

namespace lathe {

namespace {

using nlohmann::json;

const char* const kPeakKeys[] = {"fp32", "tf32", "bf16", "fp16", "int8"};

[[noreturn]] void bad_peak_table(const std::string& path, const std::string& what) {
  throw DataError("device peak table " + path + ": " + what);
}

std::string require_peak_text(const json& obj, const char* key, const std::string& path, const std::string& where) {
  if (!obj.contains(key))
    bad_peak_table(path, where + ": missing \"" + key + "\"");
  const json& v = obj.at(key);
  if (!v.is_string() || v.get<std::string>().empty())
    bad_peak_table(path, where + ": \"" + key + "\" must be a non-empty string, got " + v.dump());
  return v.get<std::string>();
}

/// Lower case, surrounding blanks removed: how CUDA names are compared.
std::string normalized_cuda_name(const std::string& name) {
  const auto first = name.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return "";
  const auto last = name.find_last_not_of(" \t\r\n");
  std::string s = name.substr(first, last - first + 1);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

DevicePeaks parse_device(const json& e, const std::string& path, size_t index) {
  std::string where = "devices[" + std::to_string(index) + "]";
  if (!e.is_object())
    bad_peak_table(path, where + ": expected an object");
  DevicePeaks d;
  d.model = require_peak_text(e, "model", path, where);
  where += " (" + d.model + ")";
  if (!e.contains("cuda_names") || !e.at("cuda_names").is_array() || e.at("cuda_names").empty())
    bad_peak_table(
        path, where + ": \"cuda_names\" must be a non-empty list of CUDA device names (as nvidia-smi prints them)");
  for (const json& n : e.at("cuda_names")) {
    if (!n.is_string() || normalized_cuda_name(n.get<std::string>()).empty())
      bad_peak_table(path, where + ": every cuda_names entry must be a non-empty string, got " + n.dump());
    d.cuda_names.push_back(n.get<std::string>());
  }
  if (!e.contains("peak_tflops") || !e.at("peak_tflops").is_object() || e.at("peak_tflops").empty())
    bad_peak_table(path, where + ": \"peak_tflops\" must be an object of data type -> dense TFLOP/s");
  for (const auto& item : e.at("peak_tflops").items()) {
    const std::string& key = item.key();
    if (std::find(std::begin(kPeakKeys), std::end(kPeakKeys), key) == std::end(kPeakKeys))
      bad_peak_table(path,
                     where + ": peak_tflops." + key + ": unknown data type (allowed: fp32, tf32, bf16, fp16, int8)");
    if (!item.value().is_number() || item.value().get<double>() <= 0)
      bad_peak_table(path, where + ": peak_tflops." + key + " must be a number > 0, got " + item.value().dump());
    d.peak_per_s[key] = item.value().get<double>() * 1e12;
  }
  d.source = require_peak_text(e, "source", path, where);
  if (e.contains("sms")) {
    const json& sms = e.at("sms");
    if (!sms.is_number_integer() || sms.get<int64_t>() <= 0 || sms.get<int64_t>() > 100000)
      bad_peak_table(path, where + ": \"sms\" (the board's streaming multiprocessors) must be an integer > 0, got " +
                               sms.dump());
    d.sms = sms.get<int>();
  }
  return d;
}

std::string tflops_text(double per_s) {
  std::ostringstream s;
  s << per_s / 1e12;
  return s.str();
}

}  // namespace

double DevicePeaks::peak(const std::string& key) const {
  const auto it = peak_per_s.find(key);
  return it == peak_per_s.end() ? 0.0 : it->second;
}

DevicePeakTable DevicePeakTable::load(const std::string& path) {
  const json doc = read_json_resource(path, "device peak table", "set LATHE_DEVICE_PEAKS to another table");
  if (!doc.is_object())
    bad_peak_table(path, "expected an object {\"version\": 1, \"devices\": [...]}");
  if (!doc.contains("version") || doc.at("version") != 1)
    bad_peak_table(path, "\"version\" must be 1");
  if (!doc.contains("devices") || !doc.at("devices").is_array())
    bad_peak_table(path, "\"devices\" must be a list");
  DevicePeakTable table;
  table.m_path = path;
  std::set<std::string> seen;
  for (size_t i = 0; i < doc.at("devices").size(); ++i) {
    DevicePeaks d = parse_device(doc.at("devices")[i], path, i);
    for (const std::string& name : d.cuda_names)
      if (!seen.insert(normalized_cuda_name(name)).second)
        bad_peak_table(path, "devices[" + std::to_string(i) + "] (" + d.model + "): the CUDA name \"" + name +
                                 "\" is listed twice");
    table.m_devices.push_back(std::move(d));
  }
  return table;
}

std::string DevicePeakTable::default_path() {
  const char* env = std::getenv("LATHE_DEVICE_PEAKS");
  if (env && *env)
    return env;
  return LATHE_SOURCE_DIR "/resources/device_peaks.json";
}

const DevicePeaks* DevicePeakTable::find(const std::string& cuda_name) const {
  for (const DevicePeaks& d : m_devices)
    for (const std::string& name : d.cuda_names)
      if (same_cuda_name(name, cuda_name))
        return &d;
  return nullptr;
}

bool same_cuda_name(const std::string& a, const std::string& b) {
  const std::string na = normalized_cuda_name(a);
  return !na.empty() && na == normalized_cuda_name(b);
}

std::optional<MigName> parse_mig_name(const std::string& cuda_name) {
  const std::string lower = normalized_cuda_name(cuda_name);
  const size_t at = lower.rfind(" mig ");
  if (at == std::string::npos || at == 0)
    return std::nullopt;
  // Positions in `lower` are those of the name with its leading blanks removed.
  const std::string trimmed = cuda_name.substr(cuda_name.find_first_not_of(" \t\r\n"));
  MigName m{trimmed.substr(0, at), normalized_cuda_name(trimmed.substr(at + 5))};
  // A profile starts with the slice's compute size: "1g.5gb", or "1c.3g.40gb" for a compute instance.
  if (m.profile.empty() || !std::isdigit(static_cast<unsigned char>(m.profile[0])))
    return std::nullopt;
  return m;
}

std::string peak_key(DType compute, bool tf32) {
  switch (compute) {
    case DType::f32:
      return tf32 ? "tf32" : "fp32";
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "fp16";
    case DType::s8:
      return "int8";
    default:
      throw Error("peak_key: no datasheet peak for " + std::string(dtype_name(compute)) +
                  " (allowed: f32, bf16, f16, s8)");
  }
}

std::string peak_key(const std::string& peak_flops_dtype) {
  if (peak_flops_dtype.empty())
    return "fp32";
  if (peak_flops_dtype == "tf32")
    return "tf32";
  return peak_key(dtype_from_name(peak_flops_dtype), false);
}

std::optional<DevicePeaks> device_peaks(const DevicePeakTable& table, const std::string& device_name, int device_sms,
                                        std::string* why) {
  if (const DevicePeaks* d = table.find(device_name))
    return *d;
  const std::optional<MigName> mig = parse_mig_name(device_name);
  const DevicePeaks* board = mig ? table.find(mig->board) : nullptr;
  std::string missing;
  if (!mig)
    missing = "no entry for \"" + device_name + "\" in " + table.path();
  else if (!board)
    missing = "\"" + device_name + "\" is a MIG slice of \"" + mig->board + "\", which " + table.path() +
              " does not list";
  else if (board->sms <= 0 || device_sms <= 0 || device_sms > board->sms)
    missing = "the MIG slice " + mig->profile + " of " + board->model + " has " +
              (device_sms > 0 ? std::to_string(device_sms) : "an unknown number of") + " SMs and " + table.path() +
              " gives the board " + (board->sms > 0 ? std::to_string(board->sms) : "no SM count") +
              ", so its share of the board's peaks is not known";
  if (!missing.empty()) {
    if (why)
      *why = missing;
    return std::nullopt;
  }
  DevicePeaks slice = *board;
  for (auto& [key, per_s] : slice.peak_per_s)
    per_s = per_s * device_sms / board->sms;
  slice.model = board->model + ", MIG " + mig->profile + " slice (" + std::to_string(device_sms) + " of " +
                std::to_string(board->sms) + " SMs)";
  slice.cuda_names = {device_name};
  slice.sms = device_sms;
  return slice;
}

PeakChoice choose_gpu_peak(const DevicePeakTable& table, const std::string& device_name, DType compute, bool tf32,
                           const InstancePrice& instance, int device_sms) {
  const std::string key = peak_key(compute, tf32);
  PeakChoice c;
  c.dtype = compute == DType::f32 && tf32 ? "tf32" : std::string(dtype_name(compute));
  // The device's own entry, or a MIG slice's share of its board's.
  std::string why;
  if (const std::optional<DevicePeaks> d = device_peaks(table, device_name, device_sms, &why)) {
    c.peak.flops_per_s = d->peak(key);
    if (c.peak.flops_per_s <= 0) {
      c.peak.how = "unknown: the datasheet of " + d->model + " gives no " + key + " peak (" + table.path() +
                   "); device/mfu not reported";
      return c;
    }
    c.peak.how = "datasheet (" + d->source + ") for " + d->model + ": " + key + " dense " +
                 tflops_text(c.peak.flops_per_s) + " TFLOP/s";
    if (!table.find(device_name)) {  // a slice: say what it is a share of
      const DevicePeaks& board = *table.find(parse_mig_name(device_name)->board);
      c.peak.how += " (the board's " + tflops_text(board.peak(key)) + " x " + std::to_string(d->sms) + " of its " +
                    std::to_string(board.sms) + " SMs)";
    }
    return c;
  }
  if (parse_mig_name(device_name)) {  // never the instance's peak: a whole GPU's, up to 8x the slice's
    c.peak.how = "unknown: " + why + "; device/mfu not reported";
    return c;
  }
  c.peak.flops_per_s = instance.peak_flops(key);
  if (c.peak.flops_per_s > 0) {
    c.peak.how = "datasheet (" + instance.peak_flops_source + ") for cost.instance " + instance.name + "'s " +
                 instance.gpu_model + ": " + key + " dense " + tflops_text(c.peak.flops_per_s) +
                 " TFLOP/s; the device \"" + device_name + "\" is not in " + table.path() +
                 ", so this may be another GPU's peak";
  } else {
    c.peak.how = "unknown: the device \"" + device_name + "\" is not in " + table.path() + " and cost.instance " +
                 instance.name + " has no " + key + " peak; device/mfu not reported";
  }
  return c;
}

}  // namespace lathe
