# shellcheck shell=bash
# Sourced from the repository root by bench/h200.sh and the device scripts beside it (copies_clock_check.sh,
# stream_depth_check.sh, tile_ring_check.sh): how a variant NAME:KNOBS becomes foundry's flags and kernels,
# and the driver's statistics of the kernels a bench run timed. Functions only.
# A variant NAME:KNOB=VALUE,KNOB=VALUE (knobs without FOUNDRY_) as `foundry --set` flags in $sets;
# "plan" sets nothing.
variant_sets() {
  sets=()
  [ "$1" = plan ] && return 0
  local knobs k
  IFS=, read -r -a knobs <<<"${1#*:}"
  for k in "${knobs[@]}"; do sets+=(--set "$k"); done
}
# A variant NAME's kernels: the copy .device/kx/NAME where there is one (`bash bench/h200.sh
# tensor-decode copies`), else the binary's own, through FOUNDRY_KERNEL_DIR.
variant_kernels() {
  if [ -d ".device/kx/$1" ]; then export FOUNDRY_KERNEL_DIR=$PWD/.device/kx/$1; else unset FOUNDRY_KERNEL_DIR; fi
}
# Each bench --json file matching GLOB: per result and kernel, the min us, the check's error and the
# driver's registers and shared bytes.
kernel_stats() {  # GLOB
  python3 - "$1" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1])):
    for r in json.load(open(f))["results"]:
        for k, st in (r.get("statistics") or {}).items():
            d = dict(st)
            # NVIDIA's driver reports local memory (spills, arrays it could not keep in registers) in
            # the low 32 bits, with bit 36 set.
            local = int(d.get("Local Memory Size", 0)) & 0xFFFFFFFF
            print(f.split("/")[-1], r["name"], round(r["min_us"], 1), "err %.1e" % (r.get("rel_error") or 0), k[-44:],
                  "regs", d.get("Register Count"), "shared", d.get("Shared Memory Size"), "local", local)
PY
}
