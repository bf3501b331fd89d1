// `foundry_error_table`: prints the error suite's table; docs/reliability.md must contain it verbatim
// (the test docs.reliability_current).
#include <fmt/format.h>

#include "errors/ErrorRows.h"

int main() {
  fmt::print("{}", foundry::errors::markdownTable());
  return 0;
}
