#!/usr/bin/env bash
# Fetches llama.cpp's ggml as node-llama-cpp ships it (a prebuilt Vulkan backend with the coopmat2
# shaders, ggml 0.25.1) and builds the flash-attention timing harness against it:
#
#   bash bench/ggml/fetch.sh           # here: fetch (npm), check, unpack into build/ggml/, build
#   bash bench/ggml/fetch.sh build     # here: only rebuild the harness
#   bash bench/ggml/fetch.sh check     # here: the harness on this machine's Vulkan device (lavapipe)
#   bash bench/ggml/fetch.sh pack      # here: stage the harness and the two libraries in .device/ggml/
#   bash bench/ggml/fetch.sh unpack    # on the device: .device/ggml/ -> /tmp/ggml/ (bin/ and lib/)
#
# Only two libraries are needed: libggml-base.so (the graph, allocator and backend API) and
# libggml-vulkan.so (the backend, with its shaders compiled in as SPIR-V: 43 MB, 4.7 MB as xz, which is
# how it travels to the device). Headers come from the llama.cpp source bundled in node-llama-cpp
# (a git bundle), taken at the commit the libraries were built from.
set -euo pipefail
cd "$(dirname "$0")/../.."

# Pinned: node-llama-cpp 3.22.1 bundles llama.cpp release "v0.5.0" (ggml 0.25.1, commit below) and its
# Vulkan build of that release. SHA-256 of the tarballs as npm served them on 2026-11-24.
readonly VERSION=3.22.1
readonly VULKAN_PKG=@node-llama-cpp/linux-x64-vulkan VULKAN_TGZ=node-llama-cpp-linux-x64-vulkan-$VERSION.tgz
readonly VULKAN_SHA256=e10577190fc4bd1649d3b655588e5c7a85fc6b6dbf7136fee596cbe9e25521e7
readonly SOURCE_PKG=node-llama-cpp SOURCE_TGZ=node-llama-cpp-$VERSION.tgz
readonly SOURCE_SHA256=a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f
readonly SOURCE_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6
readonly HEADERS="ggml.h ggml-alloc.h ggml-backend.h ggml-vulkan.h"
readonly LIBS="libggml-base.so libggml-vulkan.so"

dir=build/ggml
fetch() {
  mkdir -p "$dir/npm" "$dir/include" "$dir/lib"
  (cd "$dir/npm" &&
    for spec in "$VULKAN_PKG@$VERSION:$VULKAN_TGZ" "$SOURCE_PKG@$VERSION:$SOURCE_TGZ"; do
      [ -f "${spec#*:}" ] || npm pack --silent "${spec%%:*}" >/dev/null
    done)
  printf '%s  %s\n' "$VULKAN_SHA256" "$dir/npm/$VULKAN_TGZ" "$SOURCE_SHA256" "$dir/npm/$SOURCE_TGZ" | sha256sum --check --quiet
  local members=()
  for lib in $LIBS; do members+=("package/bins/linux-x64-vulkan/$lib"); done
  tar -xzf "$dir/npm/$VULKAN_TGZ" -C "$dir/lib" --strip-components=3 "${members[@]}"
  # The headers, from the bundled source at the libraries' commit; the 35 MB bundle is not kept.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  tar -xzf "$dir/npm/$SOURCE_TGZ" -C "$tmp" package/llama/gitRelease.bundle
  git init -q --bare "$tmp/src.git"
  git -C "$tmp/src.git" fetch -q "$tmp/package/llama/gitRelease.bundle" HEAD
  [ "$(git -C "$tmp/src.git" rev-parse FETCH_HEAD)" = "$SOURCE_COMMIT" ] ||
    { echo "fetch.sh: the bundled llama.cpp is not commit $SOURCE_COMMIT" >&2; return 1; }
  for h in $HEADERS; do git -C "$tmp/src.git" show "$SOURCE_COMMIT:ggml/include/$h" >"$dir/include/$h"; done
  git -C "$tmp/src.git" show "$SOURCE_COMMIT:ggml/CMakeLists.txt" |
    sed -n 's/^set(GGML_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' | paste -sd. >"$dir/VERSION"
}

build() {
  # Header-only fmt, so the harness needs nothing beyond the two ggml libraries and libvulkan.
  g++ -std=c++20 -O2 -Wall -Wextra -Werror -DFMT_HEADER_ONLY -DGGML_FA_BENCH_VERSION="\"$(cat "$dir/VERSION")\"" -Isrc -I"$dir/include" \
    bench/ggml/ggml_fa_bench.cpp src/foundry/steps/OutputComparison.cpp -o "$dir/ggml_fa_bench" \
    -L"$dir/lib" -lggml-vulkan -lggml-base -Wl,-rpath,'$ORIGIN/lib'
  echo "fetch.sh: built $dir/ggml_fa_bench against ggml $(cat "$dir/VERSION")"
}

case "${1:-}" in
  "")
    fetch
    build
    ;;
  build)
    build
    ;;
  check)
    # lavapipe is a CPU device, which ggml only uses when named; small shapes; the negative control
    # (a scale 5% off given to ggml; 1% off reads 2.3e-3 against the bound 3e-3) must fail its check.
    export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
    "$dir/ggml_fa_bench" --shape decode:1:8:2:512:64 decode:2:4:2:300:128 prefill:1:8:2:128:64 prefill:2:4:1:200:128 \
      --runs 3 --warmup 1 --warmup-seconds 0 --min-timed-us 0
    if "$dir/ggml_fa_bench" --shape prefill:1:8:2:128:64 --runs 1 --warmup 0 --warmup-seconds 0 --min-timed-us 0 \
      --scale-error 1.05 >/dev/null; then
      echo "fetch.sh: the negative control passed its check" >&2
      exit 1
    fi
    echo "fetch.sh: the negative control failed its check, as it must"
    ;;
  pack)
    mkdir -p .device/ggml
    cp "$dir/ggml_fa_bench" "$dir/VERSION" .device/ggml/
    cp "$dir/lib/libggml-base.so" .device/ggml/
    xz -T2 -6 -c "$dir/lib/libggml-vulkan.so" >.device/ggml/libggml-vulkan.so.xz
    for d in .device/ggml .device; do du -sh "$d"; done | awk '{print "fetch.sh: " $2 " holds " $1}'
    ;;
  unpack)
    # The device image has python3 (and its lzma) but perhaps no xz.
    mkdir -p /tmp/ggml/lib
    cp .device/ggml/ggml_fa_bench /tmp/ggml/
    cp .device/ggml/libggml-base.so /tmp/ggml/lib/
    if command -v xz >/dev/null; then
      xz -dc .device/ggml/libggml-vulkan.so.xz >/tmp/ggml/lib/libggml-vulkan.so
    else
      python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as src, open(sys.argv[2], "wb") as dst: shutil.copyfileobj(src, dst)' \
        .device/ggml/libggml-vulkan.so.xz /tmp/ggml/lib/libggml-vulkan.so
    fi
    ;;
  *)
    sed -n '2,13p' "$0"
    exit 2
    ;;
esac
