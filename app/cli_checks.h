// Option checks for lathe-cli's number options that refuse in plain words: CLI11's own
// PositiveNumber / NonNegativeNumber print their range as "0.000000 to 1797693134862315708...".
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <string>

namespace lathe::cli {

/// A finite number passing `ok`, else "expected <what>, got <text>".
template <typename Ok>
CLI::Validator number_check(const std::string& what, Ok ok) {
  return CLI::Validator(
      [what, ok](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        return end != s.c_str() && *end == 0 && std::isfinite(v) && ok(v) ? "" : "expected " + what + ", got " + s;
      },
      what);
}

inline const CLI::Validator kPositive = number_check("a number > 0", [](double v) { return v > 0; });
inline const CLI::Validator kNonNegative = number_check("a number >= 0", [](double v) { return v >= 0; });

}  // namespace lathe::cli
