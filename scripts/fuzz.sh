#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang and runs each over a copy of its seed corpus
# for a bounded time, both at once. A crash, a sanitizer report, a leak, an input that takes over 10 s
# or an exception other than the parsers' UserError / UnsupportedError fails the script; the input
# is kept under <build>/artifacts/ — add it to tests/fuzz/corpus/ (valid-* or invalid-*) so that
# foundry_unit_tests checks it from then on.
# Usage: bash scripts/fuzz.sh [seconds per target, default 60; 0 builds the targets and runs nothing]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build="${FOUNDRY_FUZZ_BUILD:-build/fuzz}"
cxx="$(command -v clang++-14 || command -v clang++ || true)"
if [ -z "$cxx" ]; then
  echo "fuzz.sh: clang++ not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DFOUNDRY_FUZZ=ON -DFOUNDRY_BUILD_TESTS=OFF > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j2 --target config_fuzzer safetensors_fuzzer
if [ "$seconds" -eq 0 ]; then exit 0; fi

pids=()
for target in config safetensors; do
  corpus="$build/corpus/$target"
  artifacts="$build/artifacts/$target"
  rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts"
  cp tests/fuzz/corpus/"$target"/* "$corpus"/
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build/fuzz/${target}_fuzzer" "$corpus" -dict=tests/fuzz/json.dict -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    > "$build/$target.log" 2>&1 &
  pids+=("$!")
done
status=0
for i in 0 1; do
  target=$([ "$i" -eq 0 ] && echo config || echo safetensors)
  if wait "${pids[$i]}"; then
    echo "fuzz $target: $(grep -E '^stat::number_of_executed_units' "$build/$target.log" | awk '{print $2}') inputs in ${seconds} s, no finding"
  else
    status=1
    echo "fuzz $target: FINDING; the log follows, the input is under $build/artifacts/$target/" >&2
    tail -n 60 "$build/$target.log" >&2
  fi
done
exit "$status"
