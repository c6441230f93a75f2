// Reads one of the JSON resource files a run prices and measures by (the instance price catalog,
// the GPU datasheet peak table): the file opened and parsed, or a DataError that names the file,
// what it is, and how to point the run at another one.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lathe {

/// The parsed document at `path`. Throws DataError "<what> <path>: cannot open the file (<open_hint>)"
/// or "<what> <path>: not valid JSON: ...".
nlohmann::json read_json_resource(const std::string& path, const std::string& what, const std::string& open_hint);

}  // namespace lathe
