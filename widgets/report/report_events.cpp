// Plain-text descriptions of stored events (see report_events.h).
#include "widgets/report/report_events.h"

#include <algorithm>

#include "widgets/report/report_text.h"

namespace lathe::report {

namespace {

std::string str(const nlohmann::json& f, const char* key) {
  if (!f.is_object() || !f.contains(key))
    return "";
  const nlohmann::json& v = f[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string num(const nlohmann::json& f, const char* key) {
  if (!f.is_object() || !f.contains(key) || !f[key].is_number())
    return "";
  return format_value(f[key].get<double>());
}

std::string join_nonempty(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty())
      continue;
    if (!out.empty())
      out += ", ";
    out += p;
  }
  return out;
}

std::string labelled(const std::string& label, const std::string& value) {
  return value.empty() ? "" : label + " " + value;
}

std::string clipped(std::string text, size_t max_chars) {
  if (text.size() > max_chars)
    text = text.substr(0, max_chars - 3) + "...";
  return text;
}

}  // namespace

std::string describe_event(const EventRecord& e) {
  const nlohmann::json& f = e.fields;
  if (e.kind == "started") {
    const std::string backend = str(f, "backend");
    const std::string device = str(f, "device");
    std::string price;
    if (f.is_object() && f.contains("price_usd_per_hour") && f["price_usd_per_hour"].is_number())
      price = format_headline("cost/usd", f["price_usd_per_hour"].get<double>()) + "/h";
    return join_nonempty({labelled("backend", backend) + (device.empty() ? "" : " on " + device),
                          labelled("threads", num(f, "threads")), labelled("OpenMP wait", str(f, "omp_wait_policy")),
                          labelled("train samples", num(f, "train_samples")),
                          labelled("test samples", num(f, "test_samples")),
                          labelled("instance", str(f, "instance")) + (price.empty() ? "" : " at " + price),
                          labelled("steps", num(f, "total_steps"))});
  }
  if (e.kind == "epoch")
    return join_nonempty({str(f, "phase"), labelled("epoch", num(f, "epoch")), labelled("step", num(f, "step")),
                          labelled("test accuracy", num(f, "test_accuracy")),
                          labelled("test loss", num(f, "test_loss"))});
  if (e.kind == "artifact")
    return join_nonempty({str(f, "kind"), str(f, "path"), num(f, "bytes").empty() ? "" : num(f, "bytes") + " bytes"});
  if (e.kind == "finished" || e.kind == "cancelled" || e.kind == "interrupted") {
    std::string elapsed;
    if (f.is_object() && f.contains("elapsed_s") && f["elapsed_s"].is_number())
      elapsed = format_duration_s(f["elapsed_s"].get<double>());
    return join_nonempty({labelled("steps", num(f, "steps")), labelled("elapsed", elapsed)});
  }
  if (e.kind == "status") {
    std::string text = str(f, "from").empty() ? str(f, "to") : str(f, "from") + " \u2192 " + str(f, "to");
    const std::string why = !str(f, "error").empty() ? str(f, "error") : str(f, "reason");
    if (!why.empty())
      text += ": " + why;
    return clipped(text, 2000);
  }
  if (f.is_object() && f.contains("error"))
    return clipped(str(f, "error"), 2000);
  if (f.is_object() && f.contains("text"))
    return clipped(str(f, "text"), 2000);
  if (f.is_null() || (f.is_object() && f.empty()))
    return "";
  if (!f.is_object())
    return clipped(f.dump(), 400);
  // Any other kind (phase, latency, prune, quant...): "key value" pairs, nested values as JSON.
  std::string out;
  for (auto it = f.begin(); it != f.end(); ++it) {
    std::string value;
    if (it->is_string())
      value = it->get<std::string>();
    else if (it->is_number())
      value = format_value(it->get<double>());
    else
      value = clipped(it->dump(), 120);
    out += (out.empty() ? "" : ", ") + it.key() + " " + value;
  }
  return clipped(out, 600);
}

std::string describe_checkpoints(const std::vector<const EventRecord*>& checkpoints) {
  std::string first_step, last_step, triggers, newest;
  double write_min = 0, write_max = 0;
  bool any_write = false;
  for (const EventRecord* e : checkpoints) {
    const nlohmann::json& f = e->fields;
    if (first_step.empty())
      first_step = num(f, "step");
    last_step = num(f, "step");
    const std::string trigger = str(f, "trigger");
    if (!trigger.empty() && triggers.find(trigger) == std::string::npos)
      triggers += (triggers.empty() ? "" : "/") + trigger;
    if (f.is_object() && f.contains("write_s") && f["write_s"].is_number()) {
      const double w = f["write_s"].get<double>();
      write_min = any_write ? std::min(write_min, w) : w;
      write_max = any_write ? std::max(write_max, w) : w;
      any_write = true;
    }
    if (!str(f, "path").empty())
      newest = str(f, "path");
  }
  std::string writes;
  if (any_write)
    writes =
        "written in " + format_value(write_min) + (write_max > write_min ? "-" + format_value(write_max) : "") + " s";
  return join_nonempty({"steps " + first_step + " to " + last_step, labelled("trigger", triggers), writes,
                        labelled("the last in", newest)});
}

bool opens_interruption(const EventRecord& e) {
  return e.kind == "spot/notice" || e.kind == "interrupted" ||
         (e.kind == "status" && str(e.fields, "to") == "interrupted");
}

std::string describe_interruption(const std::vector<const EventRecord*>& events) {
  std::string notice, checkpoint, ended, resumed;
  int checkpoints = 0;
  for (const EventRecord* e : events) {
    const nlohmann::json& f = e->fields;
    if (e->kind == "spot/notice" && notice.empty())
      notice = labelled("spot notice at step", num(f, "step"));
    else if (e->kind == "spot/checkpoint")
      checkpoint = "checkpoint at step " + num(f, "step") +
                   (num(f, "write_s").empty() ? "" : " written in " + num(f, "write_s") + " s");
    else if (e->kind == "checkpoint")
      ++checkpoints;
    else if (e->kind == "interrupted" && f.is_object() && f.contains("elapsed_s") && f["elapsed_s"].is_number())
      ended = "interrupted after " + format_duration_s(f["elapsed_s"].get<double>()) + " of this process";
    else if (e->kind == "status" && str(f, "to") == "interrupted" && ended.empty())
      ended = "interrupted" + (str(f, "reason").empty() ? "" : " (" + str(f, "reason") + ")");
    else if (e->kind == "resumed")
      resumed = labelled("resumed from step", num(f, "from_step"));
  }
  if (checkpoint.empty() && checkpoints > 0)
    checkpoint = std::to_string(checkpoints) + " checkpoint(s)";
  return join_nonempty({notice, checkpoint, ended, resumed.empty() ? "not resumed" : resumed});
}

bool is_error_event(const EventRecord& e) {
  return e.kind == "failed" || e.kind == "error" || (e.fields.is_object() && e.fields.contains("error"));
}

std::string run_error(const std::vector<EventRecord>& events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it)
    if (is_error_event(*it) && it->fields.is_object() && it->fields.contains("error"))
      return str(it->fields, "error");
  return "";
}

}  // namespace lathe::report
