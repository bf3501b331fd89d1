# Sourced by the device scripts (bench/h200.sh, interleave.sh, int8_probe.sh) from the repository root:
# the packed binaries on PATH, results under $out ($OUT when the device tool sets it), one kernel cache.
source .device/env.sh
out=${OUT:-/tmp/foundry-out}
mkdir -p "$out"
export FOUNDRY_CACHE_DIR=/tmp/foundry-cache
