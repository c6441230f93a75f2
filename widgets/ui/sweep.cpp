// Sweep expansion and validator-message splitting (see sweep.h).
#include "widgets/ui/sweep.h"

#include <sstream>

#include "engine/core/error.h"
#include "engine/run/config_schema.h"

namespace lathe::ui {

std::vector<std::string> split_values(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

std::vector<std::vector<std::string>> expand_sweep(const std::vector<SweepAxis>& axes) {
  std::vector<std::vector<std::string>> runs{{}};
  for (const SweepAxis& axis : axes) {
    if (axis.knob.empty())
      continue;
    if (!find_field(axis.knob))
      throw ConfigError("sweep knob: \"" + axis.knob + "\" is not a config field; allowed: a path from `lathe-cli schema`");
    if (axis.values.empty())
      throw ConfigError("sweep values for " + axis.knob + ": none given; allowed: one or more values separated by commas");
    std::vector<std::vector<std::string>> next;
    for (const auto& prefix : runs)
      for (const std::string& v : axis.values) {
        auto sets = prefix;
        sets.push_back(axis.knob + "=" + v);
        next.push_back(std::move(sets));
      }
    runs = std::move(next);
  }
  if (runs.size() == 1 && runs[0].empty())
    return {};
  return runs;
}

std::vector<FieldMessage> split_config_errors(const std::string& text) {
  std::vector<FieldMessage> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    FieldMessage m;
    m.message = line;
    const size_t colon = line.find(": ");
    if (colon != std::string::npos) {
      std::string head = line.substr(0, colon);
      if (head.rfind("--set ", 0) == 0)
        head = head.substr(6);
      if (head.find(' ') == std::string::npos)
        m.path = head;
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace lathe::ui
