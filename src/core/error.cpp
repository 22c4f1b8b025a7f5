#include "core/error.hpp"

#include <cstdio>
#include <cstdlib>

namespace asteria::detail {

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "asteria: internal error: %s:%d: assertion '%s' failed%s%s\n", file, line,
               expr, msg.empty() ? "" : ": ", msg.c_str());
  std::abort();
}

}  // namespace asteria::detail
