#pragma once
// Errors. Every failure a user can cause (config, data, checkpoint, command line) is thrown as
// asteria::Error with a message that names what is wrong and where; the apps turn it into a
// message on stderr and a non-zero exit. Programming errors use ASTERIA_ASSERT (always on).
#include <sstream>
#include <stdexcept>
#include <string>

namespace asteria {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);
}  // namespace detail

// A user's value as a message echoes it: whole when short, else its first `max` characters and
// its length, so a 5,000-character value does not bury the message.
std::string excerpt(const std::string& text, size_t max = 80);

// Throws asteria::Error built from the streamed arguments.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

}  // namespace asteria

#define ASTERIA_CHECK(cond, ...)                   \
  do {                                             \
    if (!(cond)) ::asteria::fail(__VA_ARGS__);     \
  } while (0)

#define ASTERIA_ASSERT(cond, ...)                                                              \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::asteria::detail::assert_fail(#cond, __FILE__, __LINE__,                                \
                                     ::asteria::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
