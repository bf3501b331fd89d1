#!/usr/bin/env bash
# A kernel's first compile on the default device (lavapipe without a GPU): one `foundry bench --runs 1
# --warmup 0 --shape SHAPE` process with Mesa's shader cache and Foundry's kernel cache both empty, its
# wall time. A decode shape's time is the process's own share (the bench's kernels, the inputs, the check).
# Usage: bash bench/lavapipe_compile_time.sh SHAPE [--set KNOB=VALUE ...]   (from the repository root)
set -uo pipefail
shape=${1:?a shape, e.g. prefill:1:4:2:64:112}
shift
foundry=${FOUNDRY:-build/release/apps/foundry/foundry}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s.%N)
MESA_SHADER_CACHE_DIR=$dir/mesa FOUNDRY_CACHE_DIR=$dir/foundry "$foundry" "$@" bench --runs 1 --warmup 0 \
  --shape "$shape" >"$dir/out.txt" 2>&1
rc=$?
end=$(date +%s.%N)
printf '%s %s: rc=%d, %.1f s\n' "$shape" "$*" "$rc" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
[ "$rc" -eq 0 ] || tail -5 "$dir/out.txt"
exit "$rc"
