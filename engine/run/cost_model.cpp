// Loads the instance price catalog and prices a run: hourly instance price x instances x hours.
#include "engine/run/cost_model.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/run/device_peaks.h"
#include "engine/run/json_resource.h"

namespace lathe {

namespace {

using nlohmann::json;

[[noreturn]] void bad_catalog(const std::string& path, const std::string& what) {
  throw DataError("price catalog " + path + ": " + what);
}

const json& require(const json& obj, const char* key, const std::string& path, const std::string& where) {
  if (!obj.contains(key))
    bad_catalog(path, where + ": missing \"" + key + "\"");
  return obj.at(key);
}

double require_price(const json& obj, const char* key, const std::string& path, const std::string& where) {
  const json& v = require(obj, key, path, where);
  if (!v.is_number() || v.get<double>() < 0)
    bad_catalog(path, where + ": \"" + key + "\" must be a number >= 0, got " + v.dump());
  return v.get<double>();
}

std::string require_string(const json& obj, const char* key, const std::string& path, const std::string& where) {
  const json& v = require(obj, key, path, where);
  if (!v.is_string())
    bad_catalog(path, where + ": \"" + key + "\" must be a string, got " + v.dump());
  return v.get<std::string>();
}

InstancePrice parse_instance(const json& e, const std::string& path, size_t index) {
  std::string where = "instances[" + std::to_string(index) + "]";
  if (!e.is_object())
    bad_catalog(path, where + ": expected an object");
  InstancePrice p;
  p.name = require_string(e, "name", path, where);
  if (p.name.empty())
    bad_catalog(path, where + ": empty \"name\"");
  where += " (" + p.name + ")";
  const json& gpus = require(e, "gpus", path, where);
  if (!gpus.is_number_integer() || gpus.get<int64_t>() < 0)
    bad_catalog(path, where + ": \"gpus\" must be an integer >= 0, got " + gpus.dump());
  p.gpus = gpus.get<int>();
  p.gpu_model = require_string(e, "gpu_model", path, where);
  if (e.contains("gpu_cuda_name"))
    p.gpu_cuda_name = require_string(e, "gpu_cuda_name", path, where);
  p.on_demand_usd_per_hour = require_price(e, "on_demand_usd_per_hour", path, where);
  p.spot_usd_per_hour = require_price(e, "spot_usd_per_hour", path, where);
  p.price_date = require_string(e, "price_date", path, where);
  p.source = require_string(e, "source", path, where);
  if (p.price_date.empty() || p.source.empty())
    bad_catalog(path, where + ": every price needs a \"price_date\" and a \"source\"");
  p.spot_source = e.contains("spot_source") ? require_string(e, "spot_source", path, where) : p.source;
  if (e.contains("peak_tflops_per_device")) {
    const json& peaks = e.at("peak_tflops_per_device");
    if (!peaks.is_object())
      bad_catalog(path, where + ": \"peak_tflops_per_device\" must be an object");
    for (const auto& [precision, tflops] : peaks.items()) {
      if (!tflops.is_number() || tflops.get<double>() <= 0)
        bad_catalog(path, where + ": peak_tflops_per_device." + precision + " must be a number > 0");
      p.peak_flops_per_device[precision] = tflops.get<double>() * 1e12;
    }
    if (!p.peak_flops_per_device.empty())
      p.peak_flops_source = require_string(e, "peak_flops_source", path, where);
  }
  if (e.contains("history")) {
    const json& h = e.at("history");
    if (!h.is_array())
      bad_catalog(path, where +
                            ": \"history\" must be a list of {date, source, on_demand_usd_per_hour and/or "
                            "spot_usd_per_hour}");
    for (size_t k = 0; k < h.size(); ++k) {
      const std::string at = where + ".history[" + std::to_string(k) + "]";
      if (!h[k].is_object())
        bad_catalog(path, at + ": expected an object");
      PastPrice past;
      past.date = require_string(h[k], "date", path, at);
      past.source = require_string(h[k], "source", path, at);
      for (auto [key, field] : {std::pair{"on_demand_usd_per_hour", &past.on_demand_usd_per_hour},
                                std::pair{"spot_usd_per_hour", &past.spot_usd_per_hour}})
        if (h[k].contains(key)) {
          if (!h[k].at(key).is_number() || h[k].at(key).get<double>() < 0)
            bad_catalog(path, at + "." + key + ": must be a number >= 0");
          *field = h[k].at(key).get<double>();
        }
      if (past.on_demand_usd_per_hour < 0 && past.spot_usd_per_hour < 0)
        bad_catalog(path, at + ": gives no price (on_demand_usd_per_hour or spot_usd_per_hour)");
      p.history.push_back(std::move(past));
    }
  }
  return p;
}

}  // namespace

double InstancePrice::peak_flops(const std::string& precision) const {
  const auto it = peak_flops_per_device.find(precision);
  return it == peak_flops_per_device.end() ? 0.0 : it->second;
}

PriceCatalog PriceCatalog::load(const std::string& path) {
  const json doc = read_json_resource(path, "price catalog", "set LATHE_PRICES to another catalog");
  if (!doc.is_object() || !doc.contains("instances") || !doc.at("instances").is_array())
    bad_catalog(path, "expected an object with an \"instances\" array");
  if (doc.contains("currency") && doc.at("currency") != "USD")
    bad_catalog(path, "only \"currency\": \"USD\" is supported, got " + doc.at("currency").dump());
  PriceCatalog catalog;
  catalog.m_path = path;
  const json& list = doc.at("instances");
  for (size_t i = 0; i < list.size(); ++i) {
    InstancePrice p = parse_instance(list[i], path, i);
    if (catalog.contains(p.name))
      bad_catalog(path, "instance \"" + p.name + "\" is listed twice");
    catalog.m_instances.push_back(std::move(p));
  }
  if (catalog.m_instances.empty())
    bad_catalog(path, "no instances");
  return catalog;
}

std::string PriceCatalog::default_path() {
  const char* env = std::getenv("LATHE_PRICES");
  if (env && *env)
    return env;
  return LATHE_SOURCE_DIR "/resources/prices.json";
}

bool PriceCatalog::contains(const std::string& name) const {
  for (const InstancePrice& p : m_instances)
    if (p.name == name)
      return true;
  return false;
}

const InstancePrice& PriceCatalog::find(const std::string& name) const {
  for (const InstancePrice& p : m_instances)
    if (p.name == name)
      return p;
  std::string list;
  for (const InstancePrice& p : m_instances)
    list += (list.empty() ? "" : ", ") + p.name;
  throw ConfigError("unknown instance \"" + name + "\"; the price catalog " + m_path + " lists: " + list);
}

std::vector<std::string> PriceCatalog::names() const {
  std::vector<std::string> out;
  for (const InstancePrice& p : m_instances)
    out.push_back(p.name);
  return out;
}

int instances_needed(const InstancePrice& instance, int devices) {
  LATHE_CHECK(devices >= 1, "devices must be >= 1, got ", devices);
  if (instance.gpus <= 0)
    return 1;
  return (devices + instance.gpus - 1) / instance.gpus;
}

std::string cost_projection_reason(const InstancePrice& instance, const std::string& device_name, bool on_gpu) {
  if (instance.gpus <= 0 || (instance.on_demand_usd_per_hour <= 0 && instance.spot_usd_per_hour <= 0))
    return "";
  if (on_gpu && !instance.gpu_cuda_name.empty()) {
    const std::optional<MigName> mig = parse_mig_name(device_name);  // a slice of the instance's GPU is on it
    if (same_cuda_name(mig ? mig->board : device_name, instance.gpu_cuda_name))
      return "";
  } else if (on_gpu) {
    // The model's short name: "NVIDIA A100-SXM4-40GB" -> "A100", "NVIDIA T4 16GB" -> "T4".
    std::string model = instance.gpu_model;
    if (model.rfind("NVIDIA ", 0) == 0)
      model = model.substr(7);
    model = model.substr(0, model.find_first_of(" -"));
    if (!model.empty() && device_name.find(model) != std::string::npos)
      return "";
  }
  return "timed on " + device_name + (on_gpu ? "" : " (CPU)") + ", priced at " + instance.name + "'s rate (" +
         std::to_string(instance.gpus) + "x " + instance.gpu_model +
         "): a projection of what this wall time would cost there, not a run on that instance";
}

double cost_usd(const InstancePrice& instance, bool spot, int devices, double elapsed_seconds) {
  LATHE_CHECK(elapsed_seconds >= 0 && std::isfinite(elapsed_seconds), "elapsed_seconds must be >= 0, got ",
              elapsed_seconds);
  return instance.usd_per_hour(spot) * instances_needed(instance, devices) * (elapsed_seconds / 3600.0);
}

}  // namespace lathe
