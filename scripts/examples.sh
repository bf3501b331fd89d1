#!/usr/bin/env bash
# Installs Foundry from a configured build tree into a temporary prefix, then configures, builds and
# runs examples/ from a separate build tree that knows Foundry only through find_package(Foundry)
# (CMAKE_PREFIX_PATH is the prefix): what a project that embeds Foundry does. Every example runs under
# the Khronos validation layer. The installed pkg-config file is checked to compile and link too.
# Usage: bash scripts/examples.sh [build tree to install from, default build/release]
set -euo pipefail
cd "$(dirname "$0")/.."
from="${1:-build/release}"
prefix="$(mktemp -d "${TMPDIR:-/tmp}/foundry-prefix.XXXXXX")"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$from" --prefix "$prefix" > "$prefix.install.log" 2>&1 || { cat "$prefix.install.log"; exit 1; }
rm -f "$prefix.install.log"
echo "examples: Foundry installed to $prefix ($(find "$prefix" -type f | wc -l) files)"

build=build/examples
rm -rf "$build"
cmake -S examples -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
cmake --build "$build" -j 2
ctest --test-dir "$build" --output-on-failure

# The same library through pkg-config: the umbrella header compiles and a program links statically.
printf '#include <foundry/foundry.h>\nint main() { return foundry::knobTable().empty() ? 1 : 0; }\n' > "$prefix/pc.cpp"
pcdir="$(dirname "$(find "$prefix" -name foundry.pc)")"
c++ -std=c++20 "$prefix/pc.cpp" -o "$prefix/pc" $(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs foundry)
"$prefix/pc" && echo "examples: pkg-config foundry compiles, links and runs"

# Every installed header compiles on its own against the installed tree: none reaches a header that
# was left out (cmake/FoundryInstall.cmake's FOUNDRY_INTERNAL_HEADERS).
cflags="$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags foundry) $(pkg-config --cflags gmock 2>/dev/null || true)"
(cd "$prefix/include" && find foundry -name '*.h' | sort) |
  xargs -P "$(nproc)" -I{} sh -c 'printf "#include <{}>\n" | c++ -std=c++20 -fsyntax-only -x c++ '"$cflags"' - ||
    { echo "examples: installed header {} does not compile on its own" >&2; exit 255; }'
echo "examples: every installed header ($(find "$prefix/include/foundry" -name '*.h' | wc -l)) compiles on its own"
