#!/usr/bin/env bash
# Builds Foundry and runs every test suite on the default Vulkan device (lavapipe without a GPU),
# under the Khronos validation layer, and examples/ against the library installed to a temporary
# prefix; then the host-only and error suites under ASan + UBSan, the cache-concurrency tests under
# TSan, and each fuzz target for a bounded time (docs/reliability.md).
# Usage: bash scripts/test.sh
# FOUNDRY_FUZZ_SECONDS sets the time per fuzz target (default 60; 0 skips fuzzing).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Where the time goes: each phase's end, in seconds since the script started.
mark() { echo "[test.sh] $1 at ${SECONDS} s"; }
mark "dependencies installed"
# Debian 13's glslc in a private prefix (.cache/compilers), for the coopmat2 kernels' compile test:
# fetched while the release build compiles (it waits on the network, the build on the cores), and
# awaited before the tests.
bash scripts/newer-compilers.sh >/dev/null &
compilers=$!
fuzz_seconds="${FOUNDRY_FUZZ_SECONDS:-60}"

# The ASan, TSan and fuzz builds each compile in the background at the lowest priority (nice 19)
# while the tests before them run: a core those tests leave idle (a suite's last entry alone on one
# core, the examples' configure, install and links) goes to the build, and a core they use stays
# theirs. One build at a time; `finish` awaits it and prints its output, kept in build/<name>.log
# meanwhile.
start() {
  log="build/$1.log"
  shift
  nice -n 19 bash -c "$*" >"$log" 2>&1 &
  build=$!
}
finish() {
  local status=0
  wait "$build" || status=$?
  build=""
  cat "$log"
  return "$status"
}
# A build still running when the script stops early (a test failed) stops with it: the build's shell
# and every process below it. (Not a session of its own, which would make it a scheduling group of
# its own too where the kernel groups by session, and nice 19 would then weigh nothing against the
# tests.)
stop() {
  local pids=("$1") i=0
  while [ "$i" -lt "${#pids[@]}" ]; do
    pids+=($(cat /proc/"${pids[$i]}"/task/*/children 2>/dev/null || true))
    i=$((i + 1))
  done
  kill "${pids[@]}" 2>/dev/null || true
}
# The trap keeps the script's own exit status: a build already awaited is not stopped again.
trap 'status=$?; if [ -n "${build:-}" ]; then stop "$build"; fi; exit "$status"' EXIT

# Every suite, release build.
cmake --preset release
cmake --build --preset release
mark "release build"
start asan-build "cmake --preset asan &&
  cmake --build --preset asan --target foundry foundry_unit_tests foundry_device_tests foundry_error_tests"
wait "$compilers"
mark "newer compilers fetched"
ctest --preset release
mark "release tests"

# examples/ built and run against the release build installed to a temporary prefix, as an outside
# project would: find_package(Foundry) only, and the pkg-config file.
bash scripts/examples.sh build/release
mark "examples"

# The unit, device and error suites with AddressSanitizer and UndefinedBehaviorSanitizer.
finish
mark "asan build awaited"
start tsan-build "cmake --preset tsan && cmake --build --preset tsan --target foundry foundry_tsan_tests"
ctest --preset asan -L sanitize
mark "asan tests"

# Two processes racing on one cache directory, and threads sharing one Runtime, with ThreadSanitizer
# (only what those tests need).
finish
mark "tsan build awaited"
if [ "$fuzz_seconds" -gt 0 ]; then start fuzz-build "bash scripts/fuzz.sh 0"; fi
ctest --preset tsan -L tsan
mark "tsan tests"

# The config and safetensors parsers under libFuzzer.
if [ "$fuzz_seconds" -gt 0 ]; then
  finish
  mark "fuzz build awaited"
  bash scripts/fuzz.sh "$fuzz_seconds"
  mark "fuzzing"
fi
