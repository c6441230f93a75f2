// Formats and throws lathe::Error for the check macros.
#include "engine/core/error.h"

namespace lathe::detail {

void throw_error(const char* what, const char* file, int line, const std::string& msg) {
  std::string text = msg.empty() ? std::string("check failed") : msg;
  text += " [";
  text += what;
  text += " at ";
  text += file;
  text += ":";
  text += std::to_string(line);
  text += "]";
  throw Error(text);
}

}  // namespace lathe::detail
