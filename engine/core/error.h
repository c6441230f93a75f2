// Errors: lathe::Error carries what failed and where. Library code throws, never exits.
// ConfigError and DataError are the "expected" failures a user can fix (bad config, bad file):
// lathe-cli maps them to exit code 2 and prints their message as is.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lathe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A user-fixable problem with an experiment configuration (names the JSON path and what is allowed).
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A user-fixable problem with an input file (names the file and the problem).
class DataError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_error(const char* what, const char* file, int line, const std::string& msg);

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace lathe

/// Throws lathe::Error with the failed condition, file and line when `cond` is false.
#define LATHE_CHECK(cond, ...)                                                                       \
  do {                                                                                               \
    if (!(cond))                                                                                     \
      ::lathe::detail::throw_error(#cond, __FILE__, __LINE__, ::lathe::detail::concat(__VA_ARGS__)); \
  } while (0)

/// Throws lathe::Error unconditionally.
#define LATHE_FAIL(...) \
  ::lathe::detail::throw_error("failure", __FILE__, __LINE__, ::lathe::detail::concat(__VA_ARGS__))
