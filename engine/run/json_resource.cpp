// read_json_resource (see json_resource.h).
#include "engine/run/json_resource.h"

#include <fstream>

#include "engine/core/error.h"

namespace lathe {

nlohmann::json read_json_resource(const std::string& path, const std::string& what, const std::string& open_hint) {
  std::ifstream in(path);
  if (!in)
    throw DataError(what + " " + path + ": cannot open the file (" + open_hint + ")");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(what + " " + path + ": not valid JSON: " + e.what());
  }
}

}  // namespace lathe
