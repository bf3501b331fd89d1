#pragma once
// What a fuzz target asserts about an accepted input: a broken promise traps, so libFuzzer reports it.

inline void require(bool ok) {
  if (!ok) __builtin_trap();
}
