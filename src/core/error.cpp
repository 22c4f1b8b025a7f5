#include "core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace asteria {

std::string excerpt(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  std::ostringstream os;
  os.write(text.data(), static_cast<std::streamsize>(max));
  os << "... (" << text.size() << " characters)";
  return os.str();
}

namespace detail {

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "asteria: internal error: %s:%d: assertion '%s' failed%s%s\n", file, line,
               expr, msg.empty() ? "" : ": ", msg.c_str());
  std::abort();
}

}  // namespace detail
}  // namespace asteria
