# shellcheck shell=bash
# Sourced by the ablation scripts (int8_probe.sh, d80_words.sh, coopmat2_rescale.sh): copies of
# kernels/ with statements of one kernel file rewritten, for timing through FOUNDRY_KERNEL_DIR.
# kernel_copy ROOT NAME [FROM TO]...: ROOT/NAME, a copy of kernels/ with each statement FROM of
# $KERNEL_FILE (default flashattention/decode_subgroup.glsl) replaced by TO; a FROM that is not there
# stops the script.
kernel_copy() {
  local d=$1/$2
  shift 2
  rm -rf "$d" && mkdir -p "$d" && cp -r kernels/. "$d"
  while [ $# -gt 0 ]; do
    FROM="$1" TO="$2" perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/g or die "kernel_copy: no \"$ENV{FROM}\"\n"' \
      "$d/${KERNEL_FILE:-flashattention/decode_subgroup.glsl}" || exit 2
    shift 2
  done
}
