// Loading, overriding and validating experiment configs against the schema in config_schema.cpp.
// Validation collects every problem (one line each, starting with the JSON path) so a user fixes a
// config in one pass instead of one error per run.
#include "engine/run/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "engine/compress/distill/teacher_source.h"
#include "engine/core/error.h"
#include "engine/io/onnx/onnx_import.h"
#include "engine/nn/zoo.h"
#include "engine/run/config_schema.h"
#include "engine/run/cost_model.h"

namespace lathe {

namespace {

using nlohmann::json;
using Kind = FieldSpec::Kind;

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Candidates close enough to `word` to be a plausible typo, closest first.
std::vector<std::string> close_matches(const std::string& word, const std::vector<std::string>& candidates,
                                       size_t max_results) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d <= limit)
      scored.emplace_back(d, c);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < max_results && scored[i].first <= scored[0].first + 1; ++i)
    out.push_back(scored[i].second);
  return out;
}

std::string join_quoted(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items)
    s += (s.empty() ? "\"" : ", \"") + i + "\"";
  return s;
}

const char* json_type_name(const json& v) {
  if (v.is_null())
    return "null";
  if (v.is_boolean())
    return "a boolean";
  if (v.is_number_integer())
    return "an integer";
  if (v.is_number())
    return "a number";
  if (v.is_string())
    return "a string";
  if (v.is_array())
    return "an array";
  return "an object";
}

// The schema as a tree of objects: each node lists its children in schema order.
struct SchemaNode {
  const FieldSpec* field = nullptr;  // set for leaves
  std::vector<std::string> order;
  std::map<std::string, SchemaNode> children;
};

SchemaNode build_tree() {
  SchemaNode root;
  for (const FieldSpec& f : experiment_schema()) {
    SchemaNode* node = &root;
    std::string rest = f.path;
    while (true) {
      const size_t dot = rest.find('.');
      const std::string key = rest.substr(0, dot);
      if (!node->children.count(key))
        node->order.push_back(key);
      node = &node->children[key];
      if (dot == std::string::npos)
        break;
      rest = rest.substr(dot + 1);
    }
    node->field = &f;
  }
  return root;
}

const SchemaNode& schema_tree() {
  static const SchemaNode root = build_tree();
  return root;
}

std::string join_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

class Validator {
 public:
  std::vector<std::string> problems;
  std::set<std::string> bad_paths;

  void problem(const std::string& path, const std::string& text) {
    problems.push_back(path + ": " + text);
    bad_paths.insert(path);
  }

  void object(const json& in, const SchemaNode& node, const std::string& prefix, json& out) {
    out = json::object();
    for (const auto& [key, value] : in.items()) {
      if (node.children.count(key))
        continue;
      std::string text = "unknown key";
      const std::vector<std::string> close = close_matches(key, node.order, 1);
      text += close.empty() ? "." : "; did you mean \"" + close.front() + "\"?";
      text += " Allowed keys " + (prefix.empty() ? std::string("at the top level") : "in " + prefix) + ": " +
              join_quoted(node.order);
      problem(join_path(prefix, key), text);
    }
    for (const std::string& key : node.order) {
      const SchemaNode& child = node.children.at(key);
      const std::string path = join_path(prefix, key);
      const bool given = in.contains(key);
      if (child.field) {
        out[key] = given ? leaf(in.at(key), *child.field) : child.field->default_value;
        continue;
      }
      if (given && !in.at(key).is_object()) {
        problem(path, "expected an object with keys " + join_quoted(child.order) + ", got " + in.at(key).dump());
        object(json::object(), child, path, out[key]);
        continue;
      }
      object(given ? in.at(key) : json::object(), child, path, out[key]);
    }
  }

 private:
  // Checks one leaf; returns the normalised value (or the input unchanged when it is bad).
  json leaf(const json& v, const FieldSpec& f) {
    const size_t before = problems.size();
    json value = v;
    if (v.is_null() && f.default_value.is_null())
      return v;
    switch (f.kind) {
      case Kind::integer:
        if (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()) &&
            std::fabs(v.get<double>()) < 9.0e15)
          value = static_cast<int64_t>(v.get<double>());
        if (!value.is_number_integer())
          problem(f.path, "expected " + describe_allowed(f) + ", got " + v.dump() + " (" + json_type_name(v) + ")");
        else
          range(value, f);
        break;
      case Kind::number:
        if (!v.is_number())
          problem(f.path, "expected " + describe_allowed(f) + ", got " + v.dump() + " (" + json_type_name(v) + ")");
        else
          range(value, f);
        break;
      case Kind::boolean:
        if (!v.is_boolean())
          problem(f.path, "expected true or false, got " + v.dump() + " (" + json_type_name(v) + ")");
        break;
      case Kind::string:
        if (!v.is_string())
          problem(f.path, "expected a string, got " + v.dump() + " (" + json_type_name(v) + ")");
        break;
      case Kind::enumeration:
        if (!v.is_string() || std::find(f.choices.begin(), f.choices.end(), v.get<std::string>()) == f.choices.end()) {
          std::string text = v.dump() + " is not " + describe_allowed(f);
          if (v.is_string()) {
            const std::vector<std::string> close = close_matches(v.get<std::string>(), f.choices, 1);
            if (!close.empty())
              text += "; did you mean \"" + close.front() + "\"?";
          }
          problem(f.path, text);
        }
        break;
      case Kind::object_list:
        object_list(v, f);
        break;
    }
    if (problems.size() == before && !f.supported && value != f.default_value)
      problem(f.path, f.unsupported_reason + " (got " + value.dump() + "; only the default " + f.default_value.dump() +
                          " is accepted for now)");
    return value;
  }

  void range(const json& v, const FieldSpec& f) {
    const double x = v.get<double>();
    const bool low = f.min_exclusive ? !(x > f.min) : !(x >= f.min);
    const bool high = f.max_exclusive ? !(x < f.max) : !(x <= f.max);
    if (low || high)
      problem(f.path, v.dump() + " is out of range; allowed: " + describe_allowed(f));
  }

  void object_list(const json& v, const FieldSpec& f) {
    if (!v.is_array()) {
      problem(f.path, "expected " + describe_allowed(f) + ", got " + v.dump() + " (" + json_type_name(v) + ")");
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string at = f.path + "[" + std::to_string(i) + "]";
      if (!v[i].is_object())
        problem(at, "expected an object with a string \"type\", got " + v[i].dump());
      else if (!v[i].contains("type") || !v[i].at("type").is_string())
        problem(at, "needs a string \"type\" (e.g. \"linear\", \"relu\"), got " + v[i].dump());
    }
  }
};

// Rules that tie fields together; only checked for fields that passed on their own.
void check_cross_fields(const json& out, Validator& val) {
  auto ok = [&](const char* path) { return !val.bad_paths.count(path); };
  const json& model = out.at("model");
  if (ok("model.zoo") && ok("model.layers")) {
    const bool custom = model.at("zoo") == "custom";
    if (custom && model.at("layers").empty())
      val.problem("model.layers",
                  "required when model.zoo is \"custom\": give a list like "
                  "[{\"type\":\"linear\",\"out\":128},{\"type\":\"relu\"},...]");
    if (!custom && !model.at("layers").empty())
      val.problem("model.layers", "only used when model.zoo is \"custom\" (model.zoo is " + model.at("zoo").dump() +
                                      "); remove it or set model.zoo to \"custom\"");
    // The layer list against the images it will see, so shapes that cannot work (a pool larger than
    // its input, fewer outputs than classes) fail here and not mid-run. Only Fashion-MNIST's shape
    // is known before the data is read; IDX files are checked the same way at set-up.
    if (custom && !model.at("layers").empty() && ok("data.dataset") &&
        out.at("data").at("dataset") == "fashion-mnist") {
      try {
        const std::unique_ptr<Model> m = build_model_from_layers(model.at("layers"), {1, 28, 28});
        check_model_outputs(*m, 10);
      } catch (const ConfigError& e) {  // its message starts with the layer's JSON path
        val.problems.push_back(e.what());
        val.bad_paths.insert("model.layers");
      }
    }
  }
  // An ONNX file (model.onnx, an ONNX distill.teacher) read and every node checked now, so an
  // unsupported op stops the run before it starts; its input shape and classes are checked against
  // Fashion-MNIST's here, against other data at set-up. Throws ConfigError / DataError.
  const auto check_onnx_file = [&](const std::string& file) {
    const OnnxImport imported = import_onnx(file);
    if (ok("data.dataset") && out.at("data").at("dataset") == "fashion-mnist") {
      check_onnx_input(*imported.model, {1, 28, 28});
      check_model_outputs(*imported.model, 10);
    }
  };
  if (ok("model.zoo") && ok("model.onnx")) {
    const bool onnx = model.at("zoo") == "onnx";
    const std::string file = model.at("onnx").get<std::string>();
    if (onnx && file.empty())
      val.problem("model.onnx", "required when model.zoo is \"onnx\": the .onnx file");
    if (!onnx && !file.empty())
      val.problem("model.onnx", "only used when model.zoo is \"onnx\" (model.zoo is " + model.at("zoo").dump() +
                                    "); remove it or set model.zoo to \"onnx\"");
    if (onnx && !file.empty()) {
      try {
        check_onnx_file(file);
      } catch (const Error& e) {  // ConfigError (unsupported) or DataError (unreadable file)
        val.problem("model.onnx", e.what());
      }
    }
  }
  // distill.teacher's form now; an ONNX teacher file is read and checked like model.onnx (a run's
  // teacher is found at set-up, through the run store).
  if (ok("distill.teacher") && out.contains("distill") && out.at("distill").contains("teacher")) {
    try {
      const TeacherSpec spec = parse_teacher_spec(out.at("distill").at("teacher").get<std::string>());
      if (spec.kind == TeacherSpec::Kind::onnx)
        check_onnx_file(spec.value);
    } catch (const Error& e) {  // parse_teacher_spec's messages start with the field already
      const std::string text = e.what();
      const std::string field = "distill.teacher: ";
      val.problem("distill.teacher", text.rfind(field, 0) == 0 ? text.substr(field.size()) : text);
    }
  }
  if (ok("name")) {
    const std::string name = out.at("name").get<std::string>();
    const bool control =
        std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
    if (name.empty() || name.size() > 200 || control)
      val.problem("name", "\"" + (name.size() > 40 ? name.substr(0, 40) + "..." : name) + "\" (" +
                              std::to_string(name.size()) +
                              " bytes) is not a usable run name; allowed: 1 to 200 bytes without control characters");
  }
  if (ok("output.dir") && out.at("output").at("dir").get<std::string>().empty())
    val.problem("output.dir", "\"\"; allowed: a folder path (relative to where lathe-cli runs), e.g. \"runs\"");
  const json& data = out.at("data");
  if (ok("data.dataset")) {
    const bool idx = data.at("dataset") == "idx";
    for (const char* key : {"train_images", "train_labels", "test_images", "test_labels"}) {
      const std::string path = std::string("data.") + key;
      if (!ok(path.c_str()))
        continue;
      const bool empty = data.at(key).get<std::string>().empty();
      if (idx && empty)
        val.problem(path, "required when data.dataset is \"idx\": the IDX file name");
      if (!idx && !empty)
        val.problem(path, "only used when data.dataset is \"idx\" (data.dataset is " + data.at("dataset").dump() + ")");
    }
    const bool npz = data.at("dataset") == "npz", folder = data.at("dataset") == "folder";
    if ((npz || folder) && ok("data.path") && data.at("path").get<std::string>().empty())
      val.problem("data.path", npz ? "required when data.dataset is \"npz\": a .npz file (x_train, y_train, x_test, "
                                     "y_test) or a folder of those four .npy files"
                                   : "required when data.dataset is \"folder\": the folder holding train/ and test/, "
                                     "each with one subfolder of PNG/JPEG files per class");
  }
  if (ok("cost.instance")) {
    const std::string instance = out.at("cost").at("instance").get<std::string>();
    try {
      const PriceCatalog catalog = PriceCatalog::load(PriceCatalog::default_path());
      if (!catalog.contains(instance)) {
        std::string text = "\"" + instance + "\" is not in the price catalog " + catalog.path() +
                           "; allowed: " + join_quoted(catalog.names());
        const std::vector<std::string> close = close_matches(instance, catalog.names(), 1);
        if (!close.empty())
          text += "; did you mean \"" + close.front() + "\"?";
        val.problem("cost.instance", text);
      }
    } catch (const Error& e) {
      val.problem("cost.instance", std::string("cannot check the instance: ") + e.what());
    }
  }
}

}  // namespace

std::vector<std::string> typo_matches(const std::string& word, const std::vector<std::string>& candidates,
                                      size_t max_results) {
  return close_matches(word, candidates, max_results);
}

namespace {

/// Byte offset -> "line:column" (both 1-based) in `text`.
std::string line_column(const std::string& text, size_t byte) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < std::min(text.size(), byte); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

/// nlohmann's message without its "[json.exception.x.N] parse error at line 1, column 2: " prefix.
std::string bare_message(const json::exception& e) {
  std::string what = e.what();
  for (const char* marker : {": ", "] "}) {
    const size_t at = what.find(marker, what.find(']'));
    if (at != std::string::npos) {
      what = what.substr(at + 2);
      break;
    }
  }
  return what;
}

/// Tracks where the parser is (a JSON path) and refuses a key that appears twice in one object,
/// which nlohmann would silently resolve to the last value.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(std::string source) : m_source(std::move(source)) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        m_frames.push_back({true, {}, "", 0});
        break;
      case json::parse_event_t::array_start:
        m_frames.push_back({false, {}, "", 0});
        break;
      case json::parse_event_t::key: {
        Frame& f = m_frames.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second)
          throw ConfigError(m_source + ": duplicate key \"" + f.key + "\" in " +
                            (path().empty() ? std::string("the top-level object") : path()) +
                            " (JSON would keep only the last one; remove the other)");
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        m_frames.pop_back();
        element_done();
        break;
      case json::parse_event_t::value:
        element_done();
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t index;
  };
  void element_done() {
    if (!m_frames.empty() && !m_frames.back().object)
      ++m_frames.back().index;
  }
  std::string path() const {
    std::string p;
    for (const Frame& f : m_frames) {
      if (&f == &m_frames.back() && f.object)
        break;  // the object holding the duplicate is the path so far
      p += f.object ? (p.empty() ? "" : ".") + f.key : "[" + std::to_string(f.index) + "]";
    }
    return p;
  }
  std::string m_source;
  std::vector<Frame> m_frames;
};

}  // namespace

json parse_config_text(const std::string& text, const std::string& source) {
  json cfg;
  try {
    cfg = json::parse(text, DuplicateKeyCheck(source));
  } catch (const json::parse_error& e) {
    // e.byte is 1-based: the byte at which parsing failed.
    throw ConfigError(source + ":" + line_column(text, e.byte > 0 ? e.byte - 1 : 0) +
                      ": JSON syntax error: " + bare_message(e));
  } catch (const json::out_of_range& e) {  // 1e999: a number no double holds
    throw ConfigError(source + ": " + bare_message(e) + " (JSON numbers must fit a 64-bit float or integer)");
  } catch (const json::exception& e) {
    throw ConfigError(source + ": cannot read it as JSON: " + bare_message(e));
  }
  if (!cfg.is_object())
    throw ConfigError(source + ": expected a JSON object at the top level, got " + json_type_name(cfg));
  return cfg;
}

json load_config_file(const std::string& path) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw ConfigError("config file " + path + ": it is a folder; give an experiment JSON file (see experiments/)");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ConfigError("config file " + path + ": cannot open it (does it exist?)");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_config_text(buf.str(), "config file " + path);
}

namespace {

/// The index of the first byte of `s` that is not part of well-formed UTF-8, or npos.
size_t invalid_utf8_at(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && c < 0xC2))
      return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
        return i;
    const unsigned char c1 = static_cast<unsigned char>(s[i + 1 < s.size() ? i + 1 : i]);
    if ((n == 3 && c == 0xE0 && c1 < 0xA0) || (n == 3 && c == 0xED && c1 >= 0xA0) ||
        (n == 4 && c == 0xF0 && c1 < 0x90) || (n == 4 && (c > 0xF4 || (c == 0xF4 && c1 >= 0x90))))
      return i;  // overlong, surrogate or beyond U+10FFFF
    i += n;
  }
  return std::string::npos;
}

}  // namespace

void apply_override(json& cfg, const std::string& assignment) {
  if (const size_t bad = invalid_utf8_at(assignment); bad != std::string::npos)
    throw ConfigError("--set: the argument is not valid UTF-8 (byte " + std::to_string(bad + 1) + " of " +
                      std::to_string(assignment.size()) + "); config values must be UTF-8 text");
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment + ": expected key.path=value, e.g. train.optimizer.lr=0.1");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const FieldSpec* field = find_field(key);
  if (!field) {
    std::vector<std::string> paths;
    for (const FieldSpec& f : experiment_schema())
      paths.push_back(f.path);
    std::vector<std::string> close = close_matches(key, paths, 3);
    if (close.empty()) {
      // No typo-close path: try the last segment alone ("lr" -> "train.optimizer.lr").
      const std::string last = key.substr(key.rfind('.') + 1);
      for (const std::string& p : paths) {
        const std::string p_last = p.substr(p.rfind('.') + 1);
        if (edit_distance(last, p_last) <= std::max<size_t>(1, last.size() / 4))
          close.push_back(p);
      }
    }
    std::string msg = "--set " + key + ": no such config field";
    if (!close.empty()) {
      msg += "; close matches: " + join_quoted(close);
    } else {
      // Nothing close: list what the deepest existing section holds.
      const SchemaNode* node = &schema_tree();
      std::string prefix, rest = key;
      for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
        const auto it = node->children.find(rest.substr(0, dot));
        if (it == node->children.end() || it->second.field)
          break;
        node = &it->second;
        prefix = join_path(prefix, rest.substr(0, dot));
      }
      std::vector<std::string> keys;
      for (const std::string& k : node->order)
        keys.push_back(join_path(prefix, k) + (node->children.at(k).field ? "" : ".*"));
      msg +=
          "; fields " + (prefix.empty() ? std::string("at the top level") : "in " + prefix) + ": " + join_quoted(keys);
    }
    throw ConfigError(msg);
  }
  json value;
  try {
    value = json::parse(text);
  } catch (const json::out_of_range&) {  // 1e999
    throw ConfigError("--set " + key + ": " + text + " is not a number a 64-bit float or integer can hold");
  } catch (const json::parse_error&) {
    value = text;
  }
  if ((field->kind == Kind::string || field->kind == Kind::enumeration) && !value.is_string())
    value = text;

  json* node = &cfg;
  if (!node->is_object())
    throw ConfigError("--set " + key + ": the config is not a JSON object");
  std::string rest = key, walked;
  while (true) {
    const size_t dot = rest.find('.');
    const std::string part = rest.substr(0, dot);
    walked = join_path(walked, part);
    if (dot == std::string::npos) {
      (*node)[part] = value;
      return;
    }
    json& next = (*node)[part];
    if (next.is_null())
      next = json::object();
    if (!next.is_object())
      throw ConfigError("--set " + key + ": " + walked + " is " + next.dump() + " in the config, not an object");
    node = &next;
    rest = rest.substr(dot + 1);
  }
}

json validate_config(const json& cfg) {
  if (!cfg.is_object())
    throw ConfigError(std::string("config: expected a JSON object, got ") + json_type_name(cfg));
  Validator val;
  json out;
  // {"model": {"onnx": "file.onnx"}} alone means model.zoo = "onnx".
  if (cfg.contains("model") && cfg.at("model").is_object() && cfg.at("model").contains("onnx") &&
      cfg.at("model").at("onnx").is_string() && !cfg.at("model").at("onnx").get<std::string>().empty() &&
      !cfg.at("model").contains("zoo")) {
    json with_zoo = cfg;
    with_zoo["model"]["zoo"] = "onnx";
    val.object(with_zoo, schema_tree(), "", out);
  } else {
    val.object(cfg, schema_tree(), "", out);
  }
  check_cross_fields(out, val);
  if (!val.problems.empty()) {
    std::string msg;
    for (const std::string& p : val.problems)
      msg += (msg.empty() ? "" : "\n") + p;
    throw ConfigError(msg);
  }
  return out;
}

}  // namespace lathe
