#pragma once
// What a call refuses, as text a test can match.
#include <string>

#include "foundry/Error.h"

namespace foundry::test {

/// The UserError `f` throws, as "field: message"; "accepted" when it throws nothing.
template <typename F>
std::string userError(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.field() + ": " + e.what();
  }
  return "accepted";
}

}  // namespace foundry::test
