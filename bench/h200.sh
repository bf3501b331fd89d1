#!/usr/bin/env bash
# Benchmarks Foundry against PyTorch's SDPA (flash backend), and with `peers` llama.cpp's Vulkan backend
# too, on the lent H200, in one device call.
#
#   bash bench/h200.sh prepare           # here: build (Release), pack .device/ with the binaries and
#                                        # llama.cpp's ggml with its timing harness (bench/ggml/)
#   # then, with the device tool:  run  carry=[".device"]  command="bash bench/h200.sh device"
#   bash bench/h200.sh report DIR        # here: DIR holds what the device call wrote under $OUT;
#                                        # writes the side-by-side table into docs/performance.md
#   bash bench/h200.sh peers             # on the device: the bench suite, PyTorch and llama.cpp's
#                                        # Vulkan backend on the same shapes, one table (`report` takes it)
#   bash bench/h200.sh sweep SHAPE...    # on the device: every forced variant of these shapes
#   bash bench/h200.sh merge SHAPE...    # on the device: Split-K factors x merge modes, twice
#   bash bench/h200.sh modifiers         # on the device: the attention suites (cooperative matrices
#                                        # and every modifier included), the replays, the modifier timings
#   bash bench/h200.sh replays           # on the device: gpt-oss-20b, MPT-7B and a Gemma-2 layout
#                                        # against PyTorch's own math
#   bash bench/h200.sh formats           # on the device: attention suite, then f16 against bf16 and
#                                        # token-major KV caches (3 rounds), PyTorch f16/bf16, and
#   bash bench/h200.sh formats-replay    # bf16 replays of Llama 3.1 8B and gpt-oss-20b against PyTorch
#   bash bench/h200.sh int8              # on the device: attention suite, then f16 against int8 and
#                                        # q8_0 caches (3 rounds), PyTorch f16/bf16, an int8 decode
#                                        # sweep, and Llama 3.1 8B runs with int8/q8_0 caches, --check
#   bash bench/h200.sh paged             # on the device: attention suite, then contiguous f16 against
#                                        # paged (16/64/256), int8, q8_0 and paged int8 caches (3
#                                        # rounds), PyTorch, and paged/ragged/int8 Llama runs, --check
#   bash bench/h200.sh headdims          # on the device: head-dim parity, D80/D96 decode sweeps,
#                                        # the head-dim shapes
#   bash bench/h200.sh int8-heads        # on the device: int8 decode, scale once per load, fewer heads
#                                        # per workgroup: parity, plans against f16, forced variants
#   bash bench/h200.sh int8-floor        # on the device: int8 decode against base copies, its time
#                                        # with more or fewer input copies, the decode probe, PyTorch
#   bash bench/h200.sh paged-spread      # on the device: paged against contiguous decode over several
#                                        # processes; a paged int8 Llama run, --check
#   bash bench/h200.sh int8-tc           # on the device: int8 decode as planned (tensor cores) against
#                                        # the subgroup kernel, parity first, PyTorch, Llama 3.1 int8 --check
#   bash bench/h200.sh int8-tune         # on the device: the int8 decode plans against f16 and PyTorch
#   bash bench/h200.sh decode-qs         # on the device: decode with q read from shared memory and up
#                                        # to 16 steps in flight against the plan (int8, D128/96/80/256),
#                                        # and short caches' Split-K factors
#   bash bench/h200.sh decode-qs-dims    # on the device: D80/D96 decode, q from shared memory against
#                                        # the register plan and other splits; short caches timed twice
#   bash bench/h200.sh int8-half         # on the device: int8 decode in packed f16 (half products),
#                                        # its scales once per step alone, and neither; parity first
#   bash bench/h200.sh int8-half-warps   # on the device: int8 decode (half products) with 4 subgroups
#                                        # and 32 splits, two workgroups an SM, against the plan
#   bash bench/h200.sh issue15-targets   # on the device: decode D80/D96/D256 at kv 65536 against the
#                                        # read ceiling, prefill D128/D96/D256 at S 8192, two rounds
#   bash bench/h200.sh int8-inflight     # on the device: int8 decode (half products) with more steps
#                                        # in flight on narrower lanes, against the plan
#   bash bench/h200.sh int8-w16          # on the device: int8 decode (half products) in workgroups of
#                                        # 16 subgroups (at most 128 registers a lane) against the plan
#   bash bench/h200.sh int8-dot          # on the device: int8/q8_0 decode, K through integer dot
#                                        # products against float products and f16, two rounds
#   bash bench/h200.sh nonfinite         # on the device: the NaN/Inf cases (TESTS) in shards, then SHAPES
#                                        # with the new kernels against BASE_KERNELS, interleaved
#   bash bench/h200.sh prefill-tune [V...] # on the device: causal prefill at S 2048, the plan against
#                                        # one-knob variants, three rounds in alternation
#   bash bench/h200.sh against-base      # on the device: the attention cases (TESTS), then SHAPES with
#                                        # .device/bin/foundry-base against .device/bin/foundry (and
#                                        # each build's decode probe of PROBE_SHAPES)
#   bash bench/h200.sh prefill-candidates # on the device: prefill kernel-source candidates against
#                                        # the committed kernel (bench/prefill_ablation.sh), D80 idle lanes
#   bash bench/h200.sh group-rows [V...] # on the device: decode as a prefill of each GQA group (its
#                                        # parity cases, then the plan against NAME:KNOB=VALUE variants)
#   bash bench/h200.sh mla-heads         # on the device: DeepSeek-V2-Lite decode, heads x unroll
#   bash bench/h200.sh mla               # on the device: latent-decode parity, DeepSeek-V2-Lite with
#                                        # its check, and its 27 layers after a 4096-token prompt
#   bash bench/h200.sh replay            # on the device: Llama 3.1 8B decode (32 layers, 8192-token
#                                        # prompt, 128 tokens) with FOUNDRY_DECODE_REPLAY=1 and =0,
#                                        # interleaved, 3 runs each: decode tokens/s by wall and GPU time
#   bash bench/h200.sh replay-check      # on the device: the same decode, replayed and not, with --check
#   bash bench/h200.sh probe [V...]      # on the device: the prefill probe's tests, then causal prefill
#                                        # timed and probed with the plan and other tilings
#   bash bench/h200.sh prefill-peers     # on the device: causal prefill S 512-8192, D 64/128: Foundry
#                                        # without and with a glslc for coopmat2, llama.cpp, PyTorch
#                                        # (`prepare prefill-peers` packs it)
#   bash bench/h200.sh coopmat2 [V...]   # on the device: the workgroup-scope (coopmat2) prefill's parity
#                                        # cases, then causal prefill with the plan against coopmat2
#                                        # tilings, interleaved (FOUNDRY_GLSLC from .device/compilers;
#                                        # `prepare coopmat2` packs it)
#   bash bench/h200.sh bf16-prefill [V...] # on the device: bf16 prefill on coopmat2 matrices with bf16
#                                        # operands: parity, then the plan against f16, bf16 tilings and
#                                        # the subgroup kernel, PyTorch, bf16 replays (`prepare coopmat2`)
#   bash bench/h200.sh wide-rows [V...]  # on the device: wide-row prefill (D256 with Q staged in passes)
#                                        # with the plan and other tilings; WIDE_DECODE=1: D80/D96 decode
#                                        # with idle lanes against the plan
#   bash bench/h200.sh tail-words        # on the device: decode parity, then D80/D96 decode in whole
#                                        # loads and words per lane (tail words) against the plan
#   bash bench/h200.sh tail-words-tune   # on the device: the best tail-word split with other split
#                                        # counts, subgroups, heads, batch 8, bf16 and shorter caches
#   bash bench/h200.sh tail-words-probe  # on the device: the D80 plan's registers and variants with more
#                                        # K/V in flight per compute unit
#   bash bench/h200.sh scatter           # on the device: registers, then decode with scores summed once per
#                                        # key and weighed by one lane group against the plan, then decode
#                                        # parity (SWEEPS: which sweeps, SKIP_TESTS=1: no parity)
#   bash bench/h200.sh decode-dims       # on the device: decode at every head dim 32..256 (multiples of
#                                        # 8) at kv 65536, the plan and tail words forced where they plan;
#                                        # D112's split variants (DIMS overrides the dims)
#   bash bench/h200.sh decode-probe      # on the device: the decode probe's cases, then decode shapes
#                                        # timed and probed (each workgroup's setup, stream, hand-over
#                                        # and merge; PROBE_SHAPES overrides the shapes)
#   bash bench/h200.sh bench-clock       # on the device: the plan against base copies with the SM clock
#                                        # sampled every 100 ms; PyTorch's f16/bf16 decode
#   bash bench/h200.sh bf16-tc           # on the device: bf16 decode on the tensor cores: parity, then
#                                        # bench-clock against the subgroup kernel, PyTorch f16/bf16
#   bash bench/h200.sh claims            # on the device: the claimed end's parity cases, then SHAPES with
#                                        # FOUNDRY_FA_DECODE_CLAIMED_KEYS at each of CLAIMS (0 256 512)
#                                        # interleaved, and each's decode probe of PROBE_SHAPES
#   bash bench/h200.sh suites            # on the device: the device suite, then the attention suite in
#                                        # SHARDS (8) shards at once; each shard's log in $OUT
#   bash bench/h200.sh round-skips       # on the device: the plan against copies skipping one round's
#                                        # arithmetic a subgroup (bench/decode_round_copies.py), probed
#   bash bench/h200.sh sm-fill           # on the device: decode on 128 workgroups against 132 (every
#                                        # SM) at the same work a workgroup; the int8 plan's slope
#   bash bench/h200.sh fixed-costs       # on the device: f16 and int8 decode at three cache lengths with
#                                        # 16 splits held (each format's fixed part and part per key),
#                                        # the empty dispatch and plain reads of both formats' bytes
#   bash bench/h200.sh prefill-order     # on the device: attention suite, then prefill dispatch order
#                                        # and row sums against a base build, interleaved
#   bash bench/h200.sh prepare cp        # here: only what `cp` needs (foundry_cp_bench, Open MPI's
#                                        # runtime as Debian packages: bench/mpi/), a small .device/
#   bash bench/h200.sh cp                # on a machine with several GPUs: context-parallel decode of
#                                        # one Llama-3.1-70B layer (64 heads, 8 KV heads, D 128) on
#                                        # 1, 2 (4, 8) GPUs against one GPU; $OUT/cp.jsonl, $OUT/cp.md
#   bash bench/h200.sh ranks             # on a machine with several GPUs: `mpirun -np N foundry run`
#                                        # of Llama-3.1-70B's layout (1 layer, 128K prompt, 16 tokens)
#                                        # on 1, 2 (4, 8) GPUs, and a checked run; $OUT/ranks-*.json
#   bash bench/h200.sh ring              # on a machine with several GPUs: ring prefill of the same
#                                        # layer at 128K tokens on 1, 2 (4, 8) GPUs, causally balanced
#                                        # and even splits, against one GPU; $OUT/ring.jsonl, ring.md
# Comparing builds or kernel sources in one device call: bench/interleave.sh; the prefill kernel's
# parts one at a time: bench/prefill_ablation.sh; int8 decode's arithmetic taken out part by part:
# bench/int8_probe.sh; the tensor-core int8 decode's next loads moved within its loop:
# bench/value_schedule_check.sh.
#
# The device step also runs the device test suites there first (the cooperative-matrix path only
# runs on such a GPU), so a timing is never reported for kernels that fail their checks.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/variant_helpers.sh
# On the device: the packed binaries on PATH, results under $OUT, one kernel cache for all steps.
on_device() {
  source bench/on_device.sh
}
# On the device: the GPU's name, driver and clock, printed and kept in $out/gpu.txt.
gpu_name() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
}
# On the device: the GPU's name and the whole attention suite (the cooperative-matrix variants run
# only on such a GPU); fails when the suite does.
attention_suite() {
  gpu_name
  .device/bin/foundry_attention_tests --gtest_brief=1 >"$out/attention-tests.log" 2>&1 ||
    { echo "FAILED: attention suites"; tail -40 "$out/attention-tests.log"; tail -3 "$out/attention-tests.log"; return 1; }
  tail -3 "$out/attention-tests.log"
}
# On the device: the GPU's name, then the attention cases matching FILTER, their log in $out/NAME.log
# and its last lines (with any failure) printed; sets status=1 when a case fails.
suite_subset() {
  gpu_name
  .device/bin/foundry_attention_tests --gtest_filter="$2" --gtest_brief=1 >"$out/$1.log" 2>&1 || status=1
  tail -3 "$out/$1.log"
  grep -A8 "FAILED\|Failure" "$out/$1.log" | head -40 || true
}
# On the device: the attention cases matching FILTER in SHARDS processes at once (its kernels compile on
# the CPU, one at a time a process), each under LIMIT seconds, logs as $out/NAME-i.log; a line per
# shard and its failures printed. attention_shards NAME SHARDS FILTER LIMIT; fails when a shard does.
attention_shards() {
  local name=$1 shards=$2 filter=$3 limit=$4 i rc failed=0 pids=()
  for i in $(seq 0 $((shards - 1))); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" \
      .device/bin/foundry_attention_tests --gtest_filter="$filter" --gtest_brief=1 >"$out/$name-$i.log" 2>&1 &
    pids+=("$!")
  done
  for i in $(seq 0 $((shards - 1))); do
    wait "${pids[$i]}" && rc=0 || rc=$?
    [ "$rc" -eq 0 ] || failed=1
    echo "$name shard $i: rc=$rc; $(grep -E '^\[  (PASSED|SKIPPED) ' "$out/$name-$i.log" | tr '\n' ' ')"
    grep -E -A6 "^\[  FAILED  \]|Failure$" "$out/$name-$i.log" | head -30 || true
  done
  return $failed
}
# On the device: the plan and each of "${variants[@]}" (NAME:KNOB=VALUE,...; a kernel copy named NAME
# through variant_kernels) timed over "${shapes[@]}", ROUNDS rounds in alternation, each run under
# TIMEOUT seconds with any further bench arguments; the lines "NAME (round R): ..." printed and added
# to $out/FILE; sets status=1 where a run fails.
time_variants() {
  local rounds=$1 limit=$2 file=$3 round v name
  shift 3
  for round in $(seq "$rounds"); do
    for v in plan "${variants[@]}"; do
      name=${v%%:*}
      variant_sets "$v"
      variant_kernels "$name"
      timeout "$limit" foundry "${sets[@]}" bench "$@" --shape "${shapes[@]}" 2>&1 | grep -E "us$|rror" |
        grep -v ceilings | sed "s/^/$name (round $round): /" | tee -a "$out/$file" || status=1
    done
  done
  unset FOUNDRY_KERNEL_DIR
}
# On the device: the driver's statistics of the decode kernels for head_dim D (Hq 32, Hkv 8) under
# each variant NAME:KNOB=VALUE,... ("plan" sets nothing), printed as "PREFIX NAME stats: ...".
driver_stats() {  # D PREFIX VARIANT...
  local d=$1 prefix=$2 v
  shift 2
  for v in "$@"; do
    variant_sets "$v"
    timeout 60 foundry "${sets[@]}" kernels --heads 32 --kv-heads 8 --head-dim "$d" --stats 2>&1 |
      grep -E "^decode " | sed "s/^/$prefix${v%%:*} stats: /" | cut -c1-400 || status=1
  done
}
# On the device: two rounds of each variant NAME:KNOB=VALUE,... ("plan" sets nothing) in a process of its
# own, `foundry SETS bench --runs 30` over SHAPES (default: int8 D128 decode at B1 kv 65536 and B8 kv
# 16384), each result printed by bench/sweep_table.py with the driver's registers and spills as
# "round R NAME | shape | ..." and added to $out/FILE.txt; sets status=1 where a run fails.
json_variants() {  # FILE VARIANT...
  local file=$1 round v
  shift
  for round in 1 2; do
    for v in "$@"; do
      variant_sets "$v"
      rm -f "$out/$file.json"
      # shellcheck disable=SC2086  # SHAPES is words
      timeout 90 foundry "${sets[@]}" bench --runs 30 --json "$out/$file.json" \
        --shape ${SHAPES:-decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8} >"$out/$file.log" 2>&1 || status=1
      [ -f "$out/$file.json" ] || { echo "round $round ${v%%:*}: no result"; tail -3 "$out/$file.log"; continue; }
      python3 bench/sweep_table.py "$out/$file.json" | tail -n +3 | sed "s/^/round $round ${v%%:*} /" |
        tee -a "$out/$file.txt"
    done
  done
}
# On the device: two rounds of `foundry SETS bench --sweep --runs 30` over SHAPE and the named
# variants (`foundry bench --sweep` names them), each under TIMEOUT seconds, the JSON in
# $out/NAME-ROUND.json and the lines "NAME round R: ..." (times and errors) printed; sets status=1
# where a round fails.
sweep_rounds() {  # TIMEOUT NAME SETS SHAPE VARIANT...
  local limit=$1 name=$2 sets=$3 shape=$4 round
  shift 4
  for round in 1 2; do
    # shellcheck disable=SC2086  # SETS is words: --set NAME=VALUE ...
    timeout "$limit" foundry $sets bench --sweep --runs 30 --shape "$shape" --variants "$@" \
      --json "$out/$name-$round.json" 2>&1 | grep -E "us$|rror" | sed "s/^/$name round $round: /" || status=1
  done
}
# On the device, for the runs over several GPUs: Open MPI's runtime, the GPUs listed into
# $out/gpu.txt, $gpus their number, $status 0.
several_gpus() {
  on_device
  source bench/mpi/env.sh
  status=0
  nvidia-smi -L | tee "$out/gpu.txt"
  gpus=$(nvidia-smi -L | grep -c '^GPU')
}
case "${1:-}" in
  prepare)
    bash scripts/install-deps.sh
    cmake --preset release >/dev/null
    rm -rf .device/bin
    if [ "${2:-}" = cp ]; then
      # The context-parallel bench alone: its binary (shaderc linked in), Open MPI as .debs.
      cmake --build --preset release --target foundry_cp_bench foundry
      ../shared/device/pack.sh build/release/bench/foundry_cp_bench build/release/apps/foundry/foundry
      bash bench/mpi/pack.sh
      du -sh .device | awk '{print "prepare cp: .device/ holds " $1}'
      exit 0
    fi
    if [ "${2:-}" = prefill-peers ]; then
      # The prefill-peers mode alone: foundry, Debian 13's glslc, ggml and the PyTorch script.
      cmake --build --preset release --target foundry
      ../shared/device/pack.sh build/release/apps/foundry/foundry
      rm -rf .device/compilers .device/mpi .device/ggml
      cp -r "$(dirname "$(dirname "$(bash scripts/newer-compilers.sh)")")" .device/compilers
      cp ../shared/device/torch_sdpa.py bench/compare.py .device/
      bash bench/ggml/fetch.sh
      bash bench/ggml/fetch.sh pack
      du -sh .device | awk '{print "prepare prefill-peers: .device/ holds " $1}'
      exit 0
    fi
    if [ "${2:-}" = coopmat2 ]; then
      # The coopmat2 and bf16-prefill modes alone: foundry, the attention suite, and the newer glslc
      # (scripts/newer-compilers.sh).
      cmake --build --preset release --target foundry foundry_attention_tests
      ../shared/device/pack.sh build/release/apps/foundry/foundry build/release/tests/foundry_attention_tests
      rm -rf .device/compilers .device/mpi .device/ggml
      cp -r "$(dirname "$(dirname "$(bash scripts/newer-compilers.sh)")")" .device/compilers
      du -sh .device | awk '{print "prepare coopmat2: .device/ holds " $1}'
      exit 0
    fi
    rm -rf .device/compilers
    cmake --build --preset release
    bins=(build/release/apps/foundry/foundry)
    bins+=(build/release/tests/foundry_device_tests build/release/tests/foundry_attention_tests)
    bins+=(build/release/bench/foundry_cp_bench)
    ../shared/device/pack.sh "${bins[@]}"
    bash bench/mpi/pack.sh
    cp ../shared/device/torch_sdpa.py .device/
    cp bench/compare.py bench/torch_batch.py .device/
    bash bench/ggml/fetch.sh
    bash bench/ggml/fetch.sh pack
    ;;
  device)
    on_device
    gpu_name
    foundry devices | tee -a "$out/tests.log"
    status=0
    # The suites that run kernels; the unit, runner and error suites read the source tree by its path
    # here, and run on lavapipe in CI.
    for t in .device/bin/foundry_device_tests .device/bin/foundry_attention_tests; do
      echo "== $t" >>"$out/tests.log"
      "$t" --gtest_brief=1 >/tmp/test.log 2>&1 || { status=1; echo "FAILED: $t"; tail -40 /tmp/test.log; }
      cat /tmp/test.log >>"$out/tests.log"
    done
    # A replay against PyTorch: torch makes q, k, v, applies RoPE and SDPA; foundry run must match it.
    {
      for cfg in llama-3.1-8b pythia-1.4b; do
        python3 bench/replay_torch.py "configs/$cfg.json" --layers 2 --prompt-len 64 --decode-tokens 8 --out "/tmp/replay-$cfg"
        foundry run "configs/$cfg.json" --layers 2 --prompt-len 64 --decode-tokens 8 --dtype f16 \
          --inputs "/tmp/replay-$cfg/inputs.safetensors" --expect "/tmp/replay-$cfg/expect.safetensors" --check \
          || { status=1; echo "replay $cfg: FAILED"; }
      done
      # The negative control: the same replay held to an impossible tolerance must exit 1.
      foundry run configs/llama-3.1-8b.json --layers 2 --prompt-len 64 --decode-tokens 8 --dtype f16 \
        --inputs /tmp/replay-llama-3.1-8b/inputs.safetensors --expect /tmp/replay-llama-3.1-8b/expect.safetensors \
        --tolerance 1e-9 && rc=0 || rc=$?
      echo "negative control exit code: $rc (1 expected)"
    } >"$out/replay.txt" 2>&1
    cat "$out/replay.txt"
    foundry bench --suite all --json "$out/bench.json" 2>&1 | tee "$out/bench.txt" || status=1
    python3 .device/torch_sdpa.py > "$out/torch.jsonl"
    python3 .device/torch_batch.py >> "$out/torch.jsonl"
    python3 .device/compare.py "$out/bench.json" "$out/torch.jsonl" | tee "$out/table.md"
    exit $status
    ;;
  suites)
    # The suites that run kernels, as `device` runs them, with the attention suite in SHARDS shards (8) at
    # once: its kernels compile on the CPU, one at a time a process, which takes longer than one device call.
    on_device
    gpu_name
    status=0
    .device/bin/foundry_device_tests --gtest_brief=1 >"$out/device-tests.log" 2>&1 || status=1
    tail -3 "$out/device-tests.log"
    attention_shards attention "${SHARDS:-8}" "*" "${SUITE_LIMIT_S:-400}" || status=1
    exit $status
    ;;
  peers)
    # Foundry, PyTorch's SDPA (flash backend) and llama.cpp's Vulkan backend (ggml_flash_attn_ext,
    # bench/ggml/) on the same shapes, in this one call: the bench suite (decode, and causal prefill at
    # S 512/2048/8192, D 64 and 128), then ggml on the shapes the bench wrote, then PyTorch. Every library
    # checks its output against a float64 reference before timing; fails when a check does.
    on_device
    status=0
    gpu_name
    foundry bench --suite all --json "$out/bench.json" 2>&1 | tee "$out/bench.txt" || status=1
    bash bench/ggml/fetch.sh unpack
    /tmp/ggml/ggml_fa_bench --shapes-from "$out/bench.json" >"$out/ggml.jsonl" 2>"$out/ggml.txt" || status=1
    cat "$out/ggml.txt"
    python3 .device/torch_sdpa.py >"$out/torch.jsonl"
    python3 .device/torch_batch.py >>"$out/torch.jsonl"
    python3 bench/compare.py "$out/bench.json" "$out/torch.jsonl" --ggml "$out/ggml.jsonl" | tee "$out/table.md"
    exit $status
    ;;
  prefill-peers)
    # Issue 18: causal prefill at S 512, 2048 and 8192, D 64 and 128, in one call: Foundry's plan without
    # a glslc for coopmat2 (GL_NV_cooperative_matrix) and with one (.device/compilers: the tuning table's
    # subgroup-scope coopmat2 rows), llama.cpp's Vulkan backend on those shapes, PyTorch's flash SDPA;
    # one table for each of Foundry's plans. `prepare prefill-peers` packs what it needs.
    on_device
    status=0
    gpu_name
    shapes=(prefill:1:32:8:512:64 prefill:1:32:8:2048:64 prefill:1:32:8:8192:64 prefill:1:32:8:512:128
            prefill:1:32:8:2048:128 prefill:1:32:8:8192:128)
    FOUNDRY_GLSLC= foundry bench --json "$out/prefill-cm1.json" --shape "${shapes[@]}" 2>&1 | grep -E "us$|rror" ||
      status=1
    FOUNDRY_GLSLC=$PWD/.device/compilers/bin/glslc foundry bench --json "$out/prefill-plan.json" --shape "${shapes[@]}" \
      2>&1 | grep -E "us$|rror" || status=1
    bash bench/ggml/fetch.sh unpack
    /tmp/ggml/ggml_fa_bench --shapes-from "$out/prefill-plan.json" >"$out/ggml.jsonl" 2>"$out/ggml.txt" || status=1
    cat "$out/ggml.txt"
    python3 .device/torch_sdpa.py >"$out/torch.jsonl" || status=1
    for plan in plan cm1; do
      echo "== Foundry's $plan"
      python3 .device/compare.py "$out/prefill-$plan.json" "$out/torch.jsonl" --ggml "$out/ggml.jsonl" |
        tee "$out/table-$plan.md"
    done
    exit $status
    ;;
  formats)
    # KV formats and layouts: the attention suite (KvFormat* among it, the cooperative-matrix route
    # with f32 output included), then f16 head-major caches against bf16 and token-major ones on the
    # same shapes, three rounds interleaved, and PyTorch in f16 and bf16 on those shapes.
    on_device
    status=0
    attention_suite || status=1
    shapes=()
    for base in decode:1:32:8:65536:128 decode:8:32:8:16384:128 prefill:1:32:8:8192:128; do
      shapes+=("$base" "$base+bf16" "$base+kvtok" "$base+bf16+kvtok")
    done
    for round in 1 2 3; do
      foundry bench --shape "${shapes[@]}" --json "$out/formats-$round.json" >"$out/formats-$round.txt" 2>&1 || status=1
    done
    cat "$out/formats-3.txt"
    python3 bench/torch_formats.py | tee "$out/torch-formats.jsonl" || status=1
    bash bench/h200.sh formats-replay || status=1
    exit $status
    ;;
  int8)
    # Quantized KV: the attention suite (KvFormat's int8/q8_0 cases, their prefill on cooperative
    # matrices included), f16 caches against int8 and q8_0 on the same shapes, three rounds
    # interleaved, PyTorch's f16 numbers on those shapes, then the int8 decode variants one by one.
    on_device
    status=0
    attention_suite || status=1
    shapes=()
    for base in decode:1:32:8:65536:128 decode:8:32:8:16384:128 prefill:1:32:8:8192:128; do
      shapes+=("$base" "$base+int8" "$base+q8_0")
    done
    for round in 1 2 3; do
      foundry bench --shape "${shapes[@]}" --json "$out/int8-$round.json" >"$out/int8-$round.txt" 2>&1 || status=1
    done
    cat "$out/int8-3.txt"
    python3 bench/torch_formats.py | tee "$out/torch-formats.jsonl" || status=1
    timeout 200 foundry bench --sweep --shape decode:1:32:8:65536:128+int8 --json "$out/int8-sweep.json" \
      >"$out/int8-sweep.txt" 2>&1 || status=1
    tail -30 "$out/int8-sweep.txt"
    for kv in int8 q8_0; do
      foundry run configs/llama-3.1-8b.json --kv-dtype "$kv" --prompt-len 4096 --decode-tokens 32 --layers 4 --check \
        >"$out/run-$kv.txt" 2>&1 || status=1
      tail -4 "$out/run-$kv.txt"
    done
    exit $status
    ;;
  paged)
    # Paged and quantized KV, in one device call of at most 10 minutes: the KV-format and paged
    # parity suites (the cooperative-matrix route included), then contiguous f16 caches against pages
    # of 16, 64 and 256 rows, int8, q8_0 and paged int8 on the same shapes, two rounds interleaved;
    # PyTorch's f16/bf16 on those shapes; Llama 3.1 8B runs with pages, ragged prompts and int8
    # (--check); torch replays run through pages. Each step has its own time limit.
    on_device
    status=0
    gpu_name
    timeout 150 .device/bin/foundry_attention_tests --gtest_brief=1 --gtest_filter='*KvPaged*:*KvFormat*:*KvAppend*' \
      >"$out/attention-tests.log" 2>&1 || status=1
    tail -3 "$out/attention-tests.log"
    shapes=()
    for base in decode:1:32:8:65536:128 decode:8:32:8:16384:128; do
      shapes+=("$base" "$base+pg16" "$base+pg64" "$base+pg256" "$base+int8" "$base+q8_0" "$base+int8+pg64" "$base+bf16")
    done
    shapes+=(prefill:1:32:8:8192:128 prefill:1:32:8:8192:128+pg64 prefill:1:32:8:8192:128+int8)
    for round in 1 2; do
      timeout 130 foundry bench --shape "${shapes[@]}" --json "$out/paged-$round.json" >"$out/paged-$round.txt" 2>&1 ||
        status=1
    done
    cat "$out/paged-2.txt"
    timeout 60 python3 bench/torch_formats.py | tee "$out/torch-formats.jsonl" || status=1
    for args in "--page-size 64 --prompt-len 4096" "--page-size 16 --prompt-lens 100,2000,4096" \
                "--kv-dtype int8 --page-size 64 --prompt-len 4096"; do
      timeout 40 foundry run configs/llama-3.1-8b.json $args --decode-tokens 32 --layers 4 --check >"$out/run.txt" 2>&1 ||
        status=1
      echo "run $args:"; grep -E "prefill  |decode  |check" "$out/run.txt"
    done
    # Paged caches against PyTorch's own math: torch's f16 replay of two sequences, run through pages
    # of 16 and 64 rows (gpt-oss-20b: sinks and windows over pages too).
    for cfg in llama-3.1-8b gpt-oss-20b; do
      timeout 40 python3 bench/replay_torch.py "configs/$cfg.json" --layers 2 --batch 2 --prompt-len 200 \
        --decode-tokens 8 --out "/tmp/replay-paged-$cfg" >/dev/null || status=1
      for page in 16 64; do
        timeout 30 foundry run "/tmp/replay-paged-$cfg/config.json" --layers 2 --batch 2 --prompt-len 200 \
          --decode-tokens 8 --page-size $page --inputs "/tmp/replay-paged-$cfg/inputs.safetensors" \
          --expect "/tmp/replay-paged-$cfg/expect.safetensors" --check >"$out/replay-paged-$cfg-$page.txt" 2>&1 ||
          { status=1; echo "paged replay $cfg pages of $page: FAILED"; }
        echo "paged replay $cfg pages of $page:"; grep -E "check|expected" "$out/replay-paged-$cfg-$page.txt"
      done
    done
    exit $status
    ;;
  int8-auto)
    # The Selector's own int8 and q8_0 decode plans against f16, one call.
    on_device
    gpu_name
    timeout 150 foundry bench --shape decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+q8_0 \
      decode:8:32:8:16384:128 decode:8:32:8:16384:128+int8 decode:8:32:8:16384:128+int8+pg64 \
      --json "$out/int8-auto.json" >"$out/int8-auto.txt" 2>&1
    status=$?
    tail -9 "$out/int8-auto.txt" | cut -c1-200
    exit $status
    ;;
  int8-variants)
    # int8 decode with each (keys per warp, load width, unroll) forced, register and spill counts in
    # the JSON (what the Selector's register model for 8-bit rows rests on), against f16 and the
    # Selector's own int8 choice; then the paged shapes `paged` had no time left for.
    on_device
    status=0
    gpu_name
    timeout 60 foundry bench --shape decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+q8_0 \
      --json "$out/int8-auto.json" 2>&1 | grep "^decode.*us$" | sed "s/^/auto: /" || status=1
    for v in "2 8 8" "2 8 4" "4 16 4" "4 16 2" "4 16 8" "2 4 8" "4 8 4" "2 8 2" "4 8 8"; do
      set -- $v
      FOUNDRY_FA_DECODE_KEYS_PER_WARP=$1 FOUNDRY_FA_DECODE_VEC=$2 FOUNDRY_FA_DECODE_UNROLL=$3 \
        timeout 40 foundry bench --shape decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8 \
        --json "$out/int8-k$1-v$2-u$3.json" 2>&1 | grep "^decode.*us$" | sed "s/^/k$1 v$2 u$3: /" || status=1
    done
    timeout 120 foundry bench --shape decode:8:32:8:16384:128 decode:8:32:8:16384:128+pg16 decode:8:32:8:16384:128+pg64 \
      decode:8:32:8:16384:128+int8 prefill:1:32:8:8192:128 prefill:1:32:8:8192:128+pg64 prefill:1:32:8:8192:128+int8 \
      --json "$out/paged-rest.json" >"$out/paged-rest.txt" 2>&1 || status=1
    grep "us$" "$out/paged-rest.txt"
    exit $status
    ;;
  int8-heads)
    # int8 decode with each load's scale taken once (a dot product per load, p * scale per load) and
    # fewer query heads per workgroup (FOUNDRY_FA_DECODE_HEADS): int8 parity on the device, the
    # Selector's plans against f16 (three rounds), forced (heads, keys per warp, load width, steps)
    # variants, and PyTorch's f16 on the same shapes.
    on_device
    status=0
    suite_subset int8-tests '*KvFormat*:*KvQuant*:*KvPaged*:*Decode*'
    for round in 1 2 3; do
      timeout 60 foundry bench --shape decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128 \
        decode:8:32:8:16384:128+int8 --json "$out/auto-$round.json" 2>&1 | grep "^decode.*us$" | sed "s/^/round $round: /" \
        || status=1
    done
    for v in "4 2 8 8" "2 2 8 8" "2 2 16 4" "2 2 16 8" "2 4 16 4" "2 4 16 8" "1 2 16 4" "1 2 16 8" "1 4 16 4" \
      "1 4 16 8" "1 2 8 8" "4 4 16 4" "4 4 16 2" "2 2 8 4" "1 4 16 2"; do
      set -- $v
      FOUNDRY_FA_DECODE_HEADS=$1 FOUNDRY_FA_DECODE_KEYS_PER_WARP=$2 FOUNDRY_FA_DECODE_VEC=$3 FOUNDRY_FA_DECODE_UNROLL=$4 \
        timeout 40 foundry bench --shape decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8 \
        --json "$out/int8-h$1-k$2-v$3-u$4.json" 2>&1 | grep "^decode.*us$" | sed "s/^/h$1 k$2 v$3 u$4: /" || status=1
    done
    python3 bench/torch_formats.py | tee "$out/torch-formats.jsonl" || status=1
    exit $status
    ;;
  formats-replay)
    # A bf16 replay against PyTorch: torch makes bf16 q, k, v, applies RoPE and SDPA in bf16; `foundry
    # run --dtype bf16` must match it (and an f16 run with a bf16 cache must match the f16 replay).
    on_device
    status=0
    {
      for cfg in llama-3.1-8b gpt-oss-20b; do
        python3 bench/replay_torch.py "configs/$cfg.json" --layers 2 --prompt-len 64 --decode-tokens 8 --dtype bf16 \
          --out "/tmp/replay-bf16-$cfg" >/dev/null
        # The replay's own config: the sink values and window sizes it drew.
        foundry run "/tmp/replay-bf16-$cfg/config.json" --layers 2 --prompt-len 64 --decode-tokens 8 --dtype bf16 \
          --inputs "/tmp/replay-bf16-$cfg/inputs.safetensors" --expect "/tmp/replay-bf16-$cfg/expect.safetensors" \
          --check || { status=1; echo "bf16 replay $cfg: FAILED"; }
      done
      python3 bench/replay_torch.py configs/llama-3.1-8b.json --layers 2 --prompt-len 64 --decode-tokens 8 \
        --out /tmp/replay-f16 >/dev/null
      foundry run configs/llama-3.1-8b.json --layers 2 --prompt-len 64 --decode-tokens 8 --dtype f16 --kv-dtype bf16 \
        --inputs /tmp/replay-f16/inputs.safetensors --expect /tmp/replay-f16/expect.safetensors --check \
        || { status=1; echo "f16 replay with a bf16 cache: FAILED"; }
    } >"$out/replay-bf16.txt" 2>&1
    cat "$out/replay-bf16.txt"
    exit $status
    ;;
  headdims)
    # Head dims beyond 64 and 128 (docs/performance.md, "Head dims"): their parity suite with the
    # cooperative-matrix prefill, every decode variant at D80 and D96 and the prefill variants at D256,
    # and the head-dim shapes.
    on_device
    status=0
    .device/bin/foundry_attention_tests --gtest_filter='Every/HeadDims*' --gtest_brief=1 >"$out/headdims-tests.log" 2>&1 \
      || status=1
    tail -3 "$out/headdims-tests.log"
    foundry bench --sweep --shape decode:1:32:8:65536:80 decode:1:32:8:65536:96 prefill:1:32:8:8192:256 --json "$out/sweep.json" \
      >"$out/sweep.txt" 2>&1 || status=1
    python3 bench/sweep_table.py "$out/sweep.json" >"$out/sweep.md" || true
    foundry bench --shape decode:1:32:8:65536:128 decode:1:32:8:65536:80 decode:1:32:8:65536:96 \
      decode:1:32:8:65536:256 prefill:1:32:8:8192:128 prefill:1:32:8:8192:96 prefill:1:32:8:8192:256 \
      --json "$out/headdims.json" 2>&1 | tee "$out/headdims.txt" || status=1
    exit $status
    ;;
  issue15-targets)
    # Issue 15's speed targets in one call, two rounds: decode at kv 65536 for D80, D96 and D256 (each
    # against the read ceiling the bench measures in the same process) and causal prefill at S 8192 for
    # D128, D96 and D256 (TFLOP/s, and D96's and D256's against D128's).
    on_device
    status=0
    for round in 1 2; do
      rm -f "$out/targets.json"
      timeout 240 foundry bench --shape decode:1:32:8:65536:80 decode:1:32:8:65536:96 decode:1:32:8:65536:256 \
        prefill:1:32:8:8192:128 prefill:1:32:8:8192:96 prefill:1:32:8:8192:256 --json "$out/targets.json" \
        >/dev/null 2>&1 || status=1
      [ -f "$out/targets.json" ] || { echo "round $round: no result"; status=1; continue; }
      cp "$out/targets.json" "$out/targets-$round.json"
      python3 - "$out/targets.json" "$round" <<'PY' | tee -a "$out/issue15-targets.txt"
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
tf = {r["D"]: r["tflops"] for r in rs if r["kind"] == "prefill"}
for r in rs:
    extra = f"{r['pct_ceiling']:.1f}% of {r['ceiling']}" if r["kind"] == "decode" else \
        f"{r['tflops']:.1f} TFLOP/s, {r['tflops'] / tf[128]:.2f}x D128"
    print(f"round {sys.argv[2]}: {r['name']} {r['us']:.1f} us {'ok' if r['checked'] else 'FAIL'} {extra}")
PY
    done
    exit $status
    ;;
  mla)
    # DeepSeek-V2-Lite's absorbed MLA through `foundry run` (docs/performance.md, "Latent values"):
    # the latent-decode and append parity suites, the config with its check, and the whole model's
    # 27 layers decoding after a 4096-token prompt (the prompt materialised), replayed and not.
    on_device
    status=0
    .device/bin/foundry_attention_tests --gtest_filter='Every/HeadDims*v512*:Every/HeadDims*v128*:*KvAppendParity*' \
      --gtest_brief=1 >"$out/mla-tests.log" 2>&1 || status=1
    tail -3 "$out/mla-tests.log"
    foundry run configs/deepseek-v2-lite.json --check --layers 2 --prompt-len 512 --decode-tokens 16 \
      --json "$out/mla-check.json" 2>&1 | tee "$out/mla-check.txt" || status=1
    for replay in 1 0; do
      FOUNDRY_DECODE_REPLAY=$replay foundry run configs/deepseek-v2-lite.json --layers 27 --prompt-len 4096 \
        --decode-tokens 128 --json "$out/mla-27-replay$replay.json" 2>&1 | tee "$out/mla-27-replay$replay.txt" || status=1
    done
    exit $status
    ;;
  int8-tune)
    # The int8 decode plans worth choosing between, against f16 and PyTorch's f16, in one call.
    on_device
    status=0
    gpu_name
    for round in 1 2; do
      timeout 90 foundry bench --shape decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128 \
        decode:8:32:8:16384:128+int8 --json "$out/tune-auto-$round.json" 2>&1 | grep "^decode.*us$" | sed "s/^/auto: /" \
        || status=1
      for v in "2 8 8" "4 16 4" "4 16 2"; do
        set -- $v
        FOUNDRY_FA_DECODE_KEYS_PER_WARP=$1 FOUNDRY_FA_DECODE_VEC=$2 FOUNDRY_FA_DECODE_UNROLL=$3 \
          timeout 60 foundry bench --shape decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8 \
          --json "$out/tune-k$1-v$2-u$3-$round.json" 2>&1 | grep "^decode.*us$" | sed "s/^/k$1 v$2 u$3: /" || status=1
      done
    done
    timeout 120 python3 bench/torch_formats.py | tee "$out/torch-formats.jsonl" || status=1
    exit $status
    ;;
  decode-qs)
    # Decode with q read from shared memory at each use (FOUNDRY_FA_DECODE_Q_SHARED), its registers
    # left to more steps in flight (up to 16), against the plan and the register-q variants it was
    # chosen from: int8 and f16 at D128, D96, D80 and D256 (kv 65536, batch 1); then the Split-K
    # factors of short caches (kv 1024 and 4096). Register and spill counts in the JSON.
    on_device
    status=0
    suite_subset qs-tests '*DecodeVariants*:*Decode*KvFormat*'
    qs_sweep() {  # NAME "SHAPE..." VARIANT...
      local name=$1 shape=$2
      shift 2
      timeout 110 foundry bench --sweep --runs 30 --shape $shape --variants "$@" --json "$out/qs-$name.json" \
        >"$out/qs-$name.txt" 2>&1 || status=1
      grep "us" "$out/qs-$name.txt" | sed "s/^/$name: /"
    }
    qs_sweep int8 decode:1:32:8:65536:128+int8 "k4 v16 u4" "k4 v16 u8 qs" "k4 v16 u16 qs" "k2 v8 u8 qs" \
      "k2 v8 u16 qs" "k4 v16 u4 qs"
    qs_sweep f16 decode:1:32:8:65536:128 "w8 k2 v8 u8" "k2 v8 u8 qs" "k2 v8 u16 qs" "k4 v8 u8 qs" "k4 v8 u16 qs"
    qs_sweep d96 decode:1:32:8:65536:96 "w8 k4 v4 u4" "k4 v4 u8 qs" "k4 v4 u16 qs" "k8 v8 u4 qs" "k8 v8 u8 qs" \
      "k8 v4 u8 qs"
    qs_sweep d80 decode:1:32:8:65536:80 "w8 k8 v4 u2" "k8 v4 u4 qs" "k8 v4 u8 qs" "k4 v2 u8 qs" "k4 v2 u16 qs"
    qs_sweep d256 decode:1:32:8:65536:256 "w8 k1 v8 u8" "k1 v8 u16 qs" "k2 v8 u8 qs" "k2 v8 u16 qs"
    qs_sweep short "decode:1:32:8:1024:128 decode:1:32:8:4096:128" "split"
    exit $status
    ;;
  decode-qs-dims)
    # After decode-qs: D80 and D96 with q from shared memory (now the plan there) against the register
    # plan and the other splits the register model allows; the short caches timed twice in one
    # process (whether the first shape timed in a process is slower).
    on_device
    status=0
    suite_subset dims-tests '*DecodeVariants*:*Decode*KvFormat*:*HeadDim*'
    for round in 1 2; do
      timeout 150 foundry bench --sweep --runs 30 --shape decode:1:32:8:65536:96 decode:1:32:8:65536:80 --variants \
        "w8 k4 v4 u4" "w8 k8 v4 u2" "k8 v8 u2 qs" "k2 v2 u8 qs" "k4 v2 u4 qs" "k4 v2 u8 qs" "k2 v1 u8 qs" \
        "k2 v1 u16 qs" --json "$out/dims-$round.json" 2>&1 | grep "\] *:.*us$\|\]: .*us$" | sed "s/^/round $round: /" \
        || status=1
    done
    timeout 120 foundry bench --shape decode:1:32:8:1024:128 decode:1:32:8:1024:128 decode:1:32:8:4096:128 \
      decode:1:32:8:4096:128 decode:1:32:8:1024:128 2>&1 | grep "us$" | sed "s/^/short: /" || status=1
    exit $status
    ;;
  int8-half)
    # Issue 14: int8 decode with its codes multiplied in packed f16 (FOUNDRY_FA_DECODE_HALF_PRODUCTS, the
    # Hopper plan), with each step's scales read once but f32 products (FOUNDRY_FA_DECODE_STEP_SCALES=1
    # alone), and with neither (the plan before), each in a process of its own, alternating; SHAPES
    # overrides the shapes. The quantized-format, paged and decode-variant cases first.
    on_device
    status=0
    suite_subset half-tests '*DecodeQuantized*:*KvPaged*:*DecodeVariants*'
    for round in 1 2; do
      for v in half:FA_DECODE_HALF_PRODUCTS=1 scales:FA_DECODE_HALF_PRODUCTS=0,FA_DECODE_STEP_SCALES=1 \
               neither:FA_DECODE_HALF_PRODUCTS=0; do
        variant_sets "$v"
        timeout 150 foundry "${sets[@]}" bench --runs 30 --json "$out/half-$round-${v%%:*}.json" --shape \
          ${SHAPES:-decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8 decode:1:32:8:65536:64+int8 decode:8:32:8:16384:64+int8} \
          2>&1 | grep -E "us$|rror" | sed "s/^/round $round ${v%%:*}: /" || status=1
      done
    done
    exit $status
    ;;
  int8-idot-half)
    # Issue 14: int8 decode with K's codes through integer dot products and V's weighted in packed f16
    # (FOUNDRY_FA_DECODE_INT8_DOT=1 on top of the Hopper plan's half products) against the plan, each in
    # a process of its own, alternating, two rounds; then a sweep of splits with both. SHAPES overrides
    # the shapes. The int8 parity cases first.
    on_device
    status=0
    suite_subset idot-half-tests '*half_products*:*idot*:*DecodeQuantized*'
    for round in 1 2; do
      for v in plan idot:FA_DECODE_INT8_DOT=1; do
        variant_sets "$v"
        timeout 150 foundry "${sets[@]}" bench --runs 30 --json "$out/idot-half-$round-${v%%:*}.json" --shape \
          ${SHAPES:-decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8 decode:1:32:8:65536:64+int8 decode:1:32:8:65536:96+int8 decode:1:32:8:65536:256+int8 decode:1:32:8:65536:128} \
          2>&1 | grep -E "us$|rror" | sed "s/^/round $round ${v%%:*}: /" || status=1
      done
    done
    timeout 150 foundry bench --sweep --runs 20 --shape decode:1:32:8:65536:128+int8 --variants "w8 k4 v16 u4 idot sc" \
      "w8 k4 v16 u4 sc" "w8 k2 v8 u8 idot sc" "w8 k4 v8 u4 idot sc" "w8 k4 v16 u2 idot sc" "w8 k4 v8 u8 idot sc" \
      "w4 k4 v16 u4 idot sc" --json "$out/idot-half-sweep.json" 2>&1 | grep "\]: .*us$" || status=1
    exit $status
    ;;
  int8-tc)
    # Issue 14: int8 decode as planned (the tensor cores at D64/D128 on Hopper) against the subgroup
    # kernel (FOUNDRY_FA_DECODE_TENSOR_CORES=0), each a process of its own, two rounds interleaved, on
    # long, short, batched and paged caches with f16 beside; the tensor-core parity cases first
    # (SKIP_TESTS=1 skips them), then PyTorch's f16 and bf16 flash decode on the issue's shapes; Llama
    # 3.1 8B with an int8 cache, --check, last.
    on_device
    status=0
    # (The KV-format, paged and append suites as well took 208 s of a 560 s call on 2026-11-29.)
    # INT8_TC_VARIANTS (NAME:KNOBS) replaces the two; a copy named NAME under .device/kx (`bash
    # bench/h200.sh tensor-decode copies`) runs through FOUNDRY_KERNEL_DIR.
    [ -n "${SKIP_TESTS:-}" ] || suite_subset int8-tc-tests '*DecodeTensorCores*:*DecodeVariants*_tc*'
    timeout 150 python3 bench/torch_formats.py | tee "$out/torch-formats.jsonl" || status=1
    for round in 1 2; do
      for v in ${INT8_TC_VARIANTS:-plan sg:FA_DECODE_TENSOR_CORES=0}; do
        variant_sets "$v"
        variant_kernels "${v%%:*}"
        timeout 120 foundry "${sets[@]}" bench --runs 30 --json "$out/int8-tc-$round-${v%%:*}.json" --shape \
          ${SHAPES:-decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+int8+pg64 \
            decode:8:32:8:16384:128+int8 decode:1:32:8:65536:64+int8 decode:1:32:8:4096:128+int8 \
            decode:1:32:8:1024:128+int8 decode:32:32:8:2048:128+int8} \
          2>&1 | grep --line-buffered -E "us$|rror|FAIL" | sed -u "s/^/round $round ${v%%:*}: /" || status=1
      done
    done
    unset FOUNDRY_KERNEL_DIR
    kernel_stats "$out/int8-tc-1-*.json"
    rm -f "$out"/int8-tc-2-*.json
    timeout 100 foundry run configs/llama-3.1-8b.json --kv-dtype int8 --prompt-len 4096 --decode-tokens 32 --layers 4 \
      --check >"$out/run-int8.txt" 2>&1 || status=1
    tail -4 "$out/run-int8.txt"
    exit $status
    ;;
  int8-floor)
    # Issue 14: what int8 decode's time is made of besides its reads. Two rounds of: the plan and each
    # of INT8_FLOOR_VARIANTS (NAME:KNOBS, a copy under .device/kx through FOUNDRY_KERNEL_DIR; default
    # `base`) on int8 B1 D128 kv 65536, contiguous and in shuffled pages of 64, with f16 beside, each a
    # process of its own; then two rounds of the plan with the inputs rotated over 2 copies (--l2-mib 1)
    # and over 32 (--l2-mib 1024) instead of 3, for what touching more memory between calls costs. Then
    # the decode probe of both shapes (setup, stream, the splits' ends, hand-over, merge) and PyTorch's
    # f16 flash decode on the same shape.
    on_device
    status=0
    gpu_name
    shapes=(decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+int8+pg64 decode:1:32:8:65536:128)
    read -r -a variants <<<"${INT8_FLOOR_VARIANTS:-base:}"
    time_variants 2 60 int8-floor.txt --runs 30
    for round in 1 2; do
      for mib in 1 1024; do
        timeout 60 foundry bench --runs 30 --l2-mib "$mib" --shape decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 2>&1 |
          grep -E "us$|rror" | grep -v ceilings | sed "s/^/l2-mib $mib (round $round): /" | tee -a "$out/int8-floor.txt" || status=1
      done
    done
    timeout 60 foundry bench --probe --runs 30 --shape decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 \
      >"$out/probe.txt" 2>&1 || status=1
    grep -v "^\s*$" "$out/probe.txt" | tail -30
    timeout 60 python3 bench/torch_formats.py decode:1:1:65536:f16 | tee "$out/torch.jsonl" || status=1
    exit $status
    ;;
  read-scan)
    # Issue 14: how fast a read stream of int8 decode's size (128 MiB, and f16's 256) runs in decode's
    # geometry (128 workgroups of 8 subgroups, each reading a contiguous share: `blocked`) against the
    # whole GPU's (grid-strided, 8 workgroups an SM), by loads in flight a lane (`foundry bench
    # --read-scan`, READ_SCANS overrides; scans ending :ring keep each lane's loads in a ring, as the
    # decode kernels do, where `blocked` waits for a batch before issuing the next; :blocked:SPLIT:SIDES
    # reads a share in parts and sides, as decode's K and V streams; scans ending :cm2 use
    # workgroup-scope coopmat2 tensor loads and need .device/compilers); then the plan's int8 and f16
    # decode, the stream copy of `bash bench/h200.sh tensor-decode copies` where it is packed, and the
    # int8 plan's decode probe.
    on_device
    status=0
    gpu_name
    [ -x .device/compilers/bin/glslc ] && export FOUNDRY_GLSLC=$PWD/.device/compilers/bin/glslc
    scans=(${READ_SCANS:-128:1056:256:1 128:1056:256:4 128:128:256:1:blocked 128:128:256:2:blocked
      128:128:256:4:blocked 128:128:256:8:blocked 128:128:256:16:blocked 128:132:256:8:blocked
      128:128:512:4:blocked 128:128:512:8:blocked 128:256:256:4:blocked 128:256:256:8:blocked
      128:128:1024:4:blocked 256:1056:256:4 256:128:256:4:blocked 256:128:256:8:blocked
      128:128:256:4:blocked:1:2 128:128:256:8:ring 128:128:256:16:ring 256:128:256:16:ring})
    for round in 1 2; do
      timeout 120 foundry bench --suite ceilings --runs 30 --read-scan "${scans[@]}" 2>&1 |
        grep -E "^read scan|^ceilings|rror" | sed "s/^/round $round: /" | tee -a "$out/read-scan.txt" || status=1
      for v in ${SCAN_VARIANTS:-plan stream:}; do
        variant_sets "$v"
        name=${v%%:*}
        variant_kernels "$name"
        timeout 90 foundry "${sets[@]}" bench --runs 30 --shape ${SHAPES:-decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128} \
          2>&1 | grep -E "us$|rror|FAIL" | grep -v ceilings | sed "s/^/round $round $name: /" | tee -a "$out/read-scan.txt" || status=1
      done
      unset FOUNDRY_KERNEL_DIR
    done
    timeout 60 foundry bench --probe --runs 30 --shape decode:1:32:8:65536:128+int8 >"$out/probe.txt" 2>&1 || status=1
    grep -E "probe:|us$" "$out/probe.txt" | cut -c1-400
    exit $status
    ;;
  paged-spread)
    # Issue 14: how paged decode's time against contiguous varies between processes. ROUNDS (4)
    # processes of the plan on int8 and f16 B1 D128 kv 65536, contiguous and in shuffled pages of 64
    # (and 256 for int8); then Llama 3.1 8B with an int8 cache in pages of 64, --check.
    on_device
    status=0
    gpu_name
    for round in $(seq "${ROUNDS:-4}"); do
      timeout 90 foundry bench --runs 30 --shape decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+int8+pg64 \
        decode:1:32:8:65536:128+int8+pg256 decode:1:32:8:65536:128 decode:1:32:8:65536:128+pg64 2>&1 |
        grep --line-buffered -E "us$|rror|FAIL" | grep -v ceilings | sed -u "s/^/round $round: /" || status=1
    done
    timeout 90 foundry run configs/llama-3.1-8b.json --kv-dtype int8 --page-size 64 --prompt-len 4096 \
      --decode-tokens 32 --layers 4 --check >"$out/run-int8-pg64.txt" 2>&1 || status=1
    tail -4 "$out/run-int8-pg64.txt"
    exit $status
    ;;
  tensor-decode)
    # Issue 14: decode on the tensor cores (FOUNDRY_FA_DECODE_TENSOR_CORES=1: the keys as rows and the
    # GQA group's heads as the columns of 16x8 products, 16-key tiles staged per subgroup, int8 K in
    # int8 products) against the plan, int8 and f16, each variant a process of its own, alternating,
    # ROUNDS rounds (2); the driver's registers and shared bytes per kernel after. The parity cases
    # first (SKIP_TESTS=1 skips them). TC_VARIANTS picks the variants (NAME:KNOBS; a copy named NAME
    # under .device/kx runs through FOUNDRY_KERNEL_DIR), SHAPES the shapes.
    # `bash bench/h200.sh tensor-decode copies` (here, before packing) writes ablations of the int8
    # kernel, each computing a wrong output for its time only: no-s (no K loads from shared memory and
    # no score products), k-const (score products on a constant K, no loads), no-vscale (V's products
    # added unscaled), no-pv (no P^T V products), no-scales (no scale loads), skeleton (all of
    # these out at once, and V staged without widening), sk-nosync (the skeleton without barriers),
    # stream and stage (bench/decode_loop_copies.py), and with BASE_REF set, base (the kernel as
    # committed at BASE_REF).
    if [ "${2:-}" = copies ]; then
      rm -rf .device/kx && mkdir -p .device/kx
      source bench/kernel_copies.sh
      export KERNEL_FILE=flashattention/decode_coopmat.glsl
      local_s='          I8A kc;
          DC_LOAD_ROWS(kc, kbase + c * 2u, DC_ROW4K);
          const float scale = subgroupShuffle(scales.x, sbase[p] + c);
          if (DC_QCOLS) {
            const I32C both = DC_MMA(kc, q_hi[c], I32C(0));
            s[p] = s[p] + F32C(both) * scale;
          } else {
            // Two independent products, not one accumulating into the other: no product waits on another.
            const I32C hi = DC_MMA(kc, q_hi[c], I32C(0)), lo = DC_MMA(kc, q_lo[c], I32C(0));
            s[p] = s[p] + F32C(hi * 128 + lo) * scale;
          }'
      kernel_copy .device/kx no-s "$local_s" '          s[p] = s[p] + F32C(subgroupShuffle(scales.x, sbase[p] + c));'
      kernel_copy .device/kx k-const 'DC_LOAD_ROWS(kc, kbase + c * 2u, DC_ROW4K);' 'kc = I8A(int8_t(c));'
      kernel_copy .device/kx no-vscale ' * subgroupShuffle(scales.y, sbase[p] + j * 16u / KV_BLOCK_DIMS);' ';'
      local_pv='          o[j] = o[j] + DC_MMA(vt, pt, F32C(0.0)) * subgroupShuffle(scales.y, sbase[p] + j * 16u / KV_BLOCK_DIMS);'
      kernel_copy .device/kx no-pv "$local_pv" '          o[j] = o[j] + F32C(float(pt[0]));'
      local_scales='  return vec2(kv_k_scale(kv_k_row(b, kv_h, key), min(c, DC_CHUNKS_K - 1u) * KV_BLOCK_DIMS),
              kv_v_scale(kv_v_row(b, kv_h, key), min(c, DC_CHUNKS_V - 1u) * KV_BLOCK_DIMS));'
      kernel_copy .device/kx no-scales "$local_scales" '  return vec2(1.0);'
      local_widen='    dc_tile[at] = uvec4(packFloat2x16(i8_even_f16(r.x)), packFloat2x16(i8_odd_f16(r.x)),
                        packFloat2x16(i8_even_f16(r.y)), packFloat2x16(i8_odd_f16(r.y)));
    dc_tile[at + 1u] = uvec4(packFloat2x16(i8_even_f16(r.z)), packFloat2x16(i8_odd_f16(r.z)),
                             packFloat2x16(i8_even_f16(r.w)), packFloat2x16(i8_odd_f16(r.w)));'
      # skeleton: every int8 part above out at once (loads, staging, softmax, P^T, f16 P V, barriers)
      local_skeleton=("$local_s" '          s[p] = s[p] + F32C(1.0);' "$local_scales" '  return vec2(1.0);'
        "$local_widen" '    dc_tile[at] = r;
    dc_tile[at + 1u] = r;' "$local_pv" '          o[j] = DC_MMA(vt, pt, o[j]);')
      kernel_copy .device/kx skeleton "${local_skeleton[@]}"
      # sk-nosync: the skeleton without its subgroup barriers (what the four a tile cost)
      local_sync='#define DC_SYNC() controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease)'
      kernel_copy .device/kx sk-nosync "${local_skeleton[@]}" "$local_sync" '#define DC_SYNC()'
      # stream (the loads alone) and stage (the loads and the staging round trips)
      python3 bench/decode_loop_copies.py .device/kx || exit 2
      # base: the kernel as committed at BASE_REF, for a change to race its predecessor
      if [ -n "${BASE_REF:-}" ]; then
        kernel_copy .device/kx base
        git show "$BASE_REF:kernels/$KERNEL_FILE" >".device/kx/base/$KERNEL_FILE" || exit 2
      fi
      exit 0
    fi
    on_device
    status=0
    gpu_name
    if [ -z "${SKIP_TESTS:-}" ]; then
      .device/bin/foundry_attention_tests --gtest_filter='*DecodeTensorCores*:*DecodeVariants*_tc*' --gtest_brief=1 \
        >"$out/tc-tests.log" 2>&1 || status=1
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests from" "$out/tc-tests.log" | cut -c1-160
    fi
    for round in $(seq "${ROUNDS:-2}"); do
      for v in ${TC_VARIANTS:-plan tc:FA_DECODE_TENSOR_CORES=1}; do
        variant_sets "$v"
        name=${v%%:*}
        variant_kernels "$name"
        timeout 100 foundry "${sets[@]}" bench --runs 30 --json "$out/tc-$round-$name.json" --shape \
          ${SHAPES:-decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128 decode:8:32:8:16384:128+int8 decode:1:32:8:65536:64+int8} \
          2>&1 | grep -E "us$|rror|FAIL" | sed "s/^/round $round $name: /" || status=1
      done
    done
    unset FOUNDRY_KERNEL_DIR
    kernel_stats "$out/tc-1-*.json"
    rm -f "$out"/tc-2-*.json
    exit $status
    ;;
  bench-clock)
    # Issue 14: the bench with its batches queued one ahead (no idle gap between them), the SM clock
    # sampled every 100 ms meanwhile into $out/clocks.csv: the plan against BENCH_VARIANTS (NAME:KNOBS,
    # a copy under .device/kx through variant_kernels; default base:, the copy of `bench/h200.sh
    # tensor-decode copies` with BASE_REF; names starting `gapped` with --wait-each-batch, as the bench
    # timed before), ROUNDS rounds (2) over SHAPES, each a process of its own, with each shape's time
    # a call over whole batches beside the median;
    # then EXTRA (NAME:KNOBS) once on the first shape, PyTorch's f16 and bf16 flash decode, and PyTorch's
    # f16 decode timed as the bench times, queued and gapped (bench/torch_protocols.py; TORCH_DTYPES, e.g.
    # "float16 bfloat16", for more); SKIP_TORCH=1 skips PyTorch.
    on_device
    status=0
    gpu_name
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,clocks_throttle_reasons.active --format=csv,noheader \
      -lms 100 >"$out/clocks.csv" 2>&1 &
    smi=$!
    shapes=(${SHAPES:-decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+int8+pg64 decode:1:32:8:65536:128})
    for round in $(seq "${ROUNDS:-2}"); do
      for v in plan ${BENCH_VARIANTS:-base:}; do
        variant_sets "$v"
        name=${v%%:*}
        variant_kernels "$name"
        wait_each=(); [ "${name#gapped}" != "$name" ] && wait_each=(--wait-each-batch)
        echo "$(date +%T.%N | cut -c1-12) round $round $name begins"
        timeout 200 foundry "${sets[@]}" bench "${wait_each[@]}" --runs 30 --json "$out/bc-$round-$name.json" \
          --shape "${shapes[@]}" 2>&1 | grep -E "us$|rror|FAIL" | sed "s/^/round $round $name: /" || status=1
        python3 -c "import json, sys; [print('  batches:', r['name'], round(r['batch_us'], 1), 'us a call') for r in json.load(open(sys.argv[1]))['results']]" \
          "$out/bc-$round-$name.json" || status=1
      done
    done
    for v in ${EXTRA:-}; do
      variant_sets "$v"
      name=${v%%:*}
      variant_kernels "$name"
      echo "$(date +%T.%N | cut -c1-12) $name begins"
      timeout 100 foundry "${sets[@]}" bench --runs 30 --shape "${shapes[0]}" 2>&1 | grep -E "us$|rror|FAIL" |
        sed "s/^/extra $name: /" || status=1
    done
    unset FOUNDRY_KERNEL_DIR
    if [ -z "${SKIP_TORCH:-}" ]; then
      timeout 90 python3 bench/torch_formats.py decode:1:1:65536 | tee "$out/torch-formats.jsonl" || status=1
      # PyTorch timed as the bench times, queued and gapped, beside do_bench (bench/torch_protocols.py)
      for dt in ${TORCH_DTYPES:-float16}; do
        timeout 120 python3 bench/torch_protocols.py 65536 "$dt" | tee -a "$out/torch-protocols.jsonl" || status=1
      done
    fi
    kill "$smi"
    kernel_stats "$out/bc-1-*.json"
    exit $status
    ;;
  bf16-tc)
    # Issue 14: bf16 decode on the tensor cores: bf16 operands where the glslc packed by `prepare
    # coopmat2` (.device/compilers, FOUNDRY_GLSLC) compiles them, else f16 products over a power of two a
    # tile (the `--set GLSLC=` route). The tensor-core parity cases first, with the glslc and without
    # (SKIP_TESTS=1 skips them), then bench-clock: the plan against the subgroup kernel on bf16, f16 and
    # int8 at kv 65536 (and bf16 batch 8, D64), queued, ROUNDS rounds, with PyTorch's f16 and bf16 flash
    # decode timed the same ways.
    on_device
    status=0
    [ -x .device/compilers/bin/glslc ] && export FOUNDRY_GLSLC=$PWD/.device/compilers/bin/glslc
    if [ -z "${SKIP_TESTS:-}" ]; then
      suite_subset bf16-tc-tests '*DecodeTensorCores*:*DecodeVariants*_tc*'
      [ -z "${FOUNDRY_GLSLC:-}" ] || FOUNDRY_GLSLC= suite_subset bf16-tc-tests-staged '*DecodeTensorCores*bf16*'
    fi
    SHAPES="${SHAPES:-decode:1:32:8:65536:128+bf16 decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 \
      decode:8:32:8:16384:128+bf16 decode:8:32:8:16384:128 decode:1:32:8:65536:64+bf16 decode:1:32:8:65536:64}" \
      BENCH_VARIANTS="${BENCH_VARIANTS:-sg:FA_DECODE_TENSOR_CORES=0}" TORCH_DTYPES="float16 bfloat16" \
      ROUNDS="${ROUNDS:-3}" bash bench/h200.sh bench-clock || status=1
    exit $status
    ;;
  round-skips)
    # Where the tensor-core decode's time over its loads goes: bench/decode_round_copies.py's copies (made
    # here under .device/kx before packing), each skipping one round's arithmetic of every subgroup (the
    # first, the ninth, the last), against the plan, interleaved (bench/interleave.sh); then each's probe.
    on_device
    status=0
    gpu_name
    copies=(${COPIES:-skip-first skip-mid skip-last})
    specs=("plan=.device/bin/foundry")
    for v in "${copies[@]}"; do specs+=("$v=.device/bin/foundry:$PWD/.device/kx/$v"); done
    read -r -a shapes <<<"${SHAPES:-decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128}"
    RUN_LIMIT_S=${RUN_LIMIT_S:-90} bash bench/interleave.sh "${shapes[@]}" -- "${specs[@]}" || status=1
    for v in plan "${copies[@]}"; do
      dir=""; [ "$v" = plan ] || dir=$PWD/.device/kx/$v
      FOUNDRY_KERNEL_DIR=$dir timeout 60 foundry bench --probe --runs 30 --shape "${shapes[@]}" 2>&1 |
        grep -E "us$|probe:|rror" | sed "s/^/$v: /" || status=1
    done
    exit $status
    ;;
  claims)
    # Each split's chunk shortened by CLAIMS keys, the rest claimed a step (a round of tiles) at a time by
    # the subgroups done first (docs/attention.md); 0 is the plan's own. A wrapper per value sets the knob.
    on_device
    status=0
    suite_subset claims-tests "${TESTS:-*claims*:Knobs/DecodeVariants.*tc*:*DecodeTensorCores*}"
    specs=()
    for k in ${CLAIMS:-0 256 512}; do
      printf '#!/bin/sh\nFOUNDRY_FA_DECODE_CLAIMED_KEYS=%s exec "$(dirname "$0")/foundry" "$@"\n' "$k" >.device/bin/foundry-c"$k"
      chmod +x .device/bin/foundry-c"$k"
      specs+=("c$k=.device/bin/foundry-c$k")
    done
    read -r -a shapes <<<"${SHAPES:-decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:1:32:8:65536:128+bf16 \
decode:1:32:8:65536:128+int8+pg64 decode:8:32:8:16384:128 decode:1:32:8:65536:64}"
    RUN_LIMIT_S=${RUN_LIMIT_S:-90} bash bench/interleave.sh "${shapes[@]}" -- "${specs[@]}" || status=1
    read -r -a probed <<<"${PROBE_SHAPES:-decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8}"
    for spec in "${specs[@]}"; do
      timeout 60 "${spec#*=}" bench --probe --runs 30 --shape "${probed[@]}" 2>&1 | grep -E "us$|probe:|rror" |
        sed "s/^/${spec%%=*}: /" || status=1
    done
    exit $status
    ;;
  sm-fill)
    # Issue 14: whether decode is limited per SM or by the memory as a whole. The same work a workgroup
    # (4096 keys of one GQA group of 4 heads) on 128 workgroups and on 132 (every SM of an H200), int8
    # on the tensor cores and f16 on the subgroup kernel, each shape:knobs a process of its own, ROUNDS
    # rounds (2) in alternation; then the int8 plan at three cache lengths (its fixed cost and slope).
    on_device
    status=0
    gpu_name
    S4=FA_DECODE_SPLIT_K=4
    for round in $(seq "${ROUNDS:-2}"); do
      for c in "w128:decode:1:32:8:65536:128+int8:" "w128s4:decode:1:128:32:16384:128+int8:$S4" \
               "w132s4:decode:1:132:33:16384:128+int8:$S4" "f16w128:decode:1:32:8:65536:128:" \
               "f16w128s4:decode:1:128:32:16384:128:$S4" "f16w132s4:decode:1:132:33:16384:128:$S4" \
               "kv32k:decode:1:32:8:32768:128+int8:" "kv128k:decode:1:32:8:131072:128+int8:"; do
        name=${c%%:*}; rest=${c#*:}; knobs=${rest##*:}; shape=${rest%:*}
        sets=(); [ -n "$knobs" ] && sets=(--set "$knobs")
        timeout 100 foundry "${sets[@]}" bench --runs 30 --shape "$shape" 2>&1 | grep -E "us$|rror|FAIL" |
          sed "s/^/round $round $name: /" || status=1
      done
    done
    exit $status
    ;;
  fixed-costs)
    # Issue 14: each format's time as a fixed part plus a part per key. f16 and int8 decode (B1, D128, Hq 32,
    # Hkv 8) at three cache lengths with the plan's 16 splits held (FOUNDRY_FA_DECODE_SPLIT_K=16, so every
    # length runs the same kernel structure), each shape a process, ROUNDS rounds (2) in alternation; the plan
    # at kv 65536; then the floor (an empty dispatch) and plain reads of int8's and f16's bytes.
    on_device
    status=0
    gpu_name
    lens=(${LENS:-32768 65536 131072})
    for round in $(seq "${ROUNDS:-2}"); do
      for fmt in "" "+int8"; do
        for kv in "${lens[@]}"; do
          timeout 60 foundry --set FA_DECODE_SPLIT_K=16 bench --runs 30 --shape "decode:1:32:8:$kv:128$fmt" 2>&1 |
            grep -E "us$|rror|FAIL" | sed "s/^/round $round s16: /" | tee -a "$out/fixed-costs.txt" || status=1
        done
        timeout 60 foundry bench --runs 30 --shape "decode:1:32:8:65536:128$fmt" 2>&1 |
          grep -E "us$|rror|FAIL" | sed "s/^/round $round plan: /" | tee -a "$out/fixed-costs.txt" || status=1
      done
      timeout 120 foundry bench --suite ceilings --runs 30 --read-scan 128:1056:256:4 256:1056:256:4 2>&1 |
        grep -E "^read scan|^ceilings|empty|rror" | sed "s/^/round $round: /" | tee -a "$out/fixed-costs.txt" || status=1
    done
    exit $status
    ;;
  tc-waves)
    # Issue 14: whether two 4-subgroup workgroups of the tensor-core decode share an SM. Each variant
    # (NAME:KNOBS; NAME starting "sk": the skeleton copy of `bash bench/h200.sh tensor-decode copies`)
    # a process of its own with the decode probe's build (`bench --probe`: the workgroups' start spread
    # and stream time), ROUNDS rounds (2), int8 D128 B1 kv 65536; the driver's registers and shared
    # bytes after.
    on_device
    status=0
    gpu_name
    for round in $(seq "${ROUNDS:-2}"); do
      for v in ${TC_VARIANTS:-plan tc:FA_DECODE_TENSOR_CORES=1}; do
        variant_sets "$v"
        name=${v%%:*}
        if [ "${name#sk}" != "$name" ]; then export FOUNDRY_KERNEL_DIR=$PWD/.device/kx/skeleton; else unset FOUNDRY_KERNEL_DIR; fi
        timeout 60 foundry "${sets[@]}" bench --runs 30 --probe --json "$out/tw-$round-$name.json" \
          --shape ${SHAPES:-decode:1:32:8:65536:128+int8} 2>&1 | grep -E "us$|probe:|rror" | cut -c1-330 |
          sed "s/^/round $round $name: /" || status=1
      done
    done
    unset FOUNDRY_KERNEL_DIR
    kernel_stats "$out/tw-1-*.json"
    rm -f "$out"/tw-*.json
    exit $status
    ;;
  int8-half-warps)
    # int8 decode with half products at D128 kv 65536: the plan (8 subgroups, 16 splits, one workgroup an
    # SM) against 4 subgroups with 32 or 33 splits (two workgroups an SM at the same registers), 4
    # subgroups of 16 lanes per key with 8 steps, and 8 subgroups with 32 splits; two rounds, the
    # driver's register counts after each.
    on_device
    status=0
    for round in 1 2; do
      for v in plan w4-s32:FA_DECODE_WARPS=4,FA_DECODE_SPLIT_K=32 w4-s33:FA_DECODE_WARPS=4,FA_DECODE_SPLIT_K=33 \
               w4-s32-k2-v8-u8:FA_DECODE_WARPS=4,FA_DECODE_SPLIT_K=32,FA_DECODE_KEYS_PER_WARP=2,FA_DECODE_VEC=8,FA_DECODE_UNROLL=8 \
               s32:FA_DECODE_SPLIT_K=32; do
        variant_sets "$v"
        timeout 90 foundry "${sets[@]}" bench --runs 30 --shape decode:1:32:8:65536:128+int8 \
          --json "$out/warps-$round-${v%%:*}.json" 2>&1 | grep -E "us$|rror" | sed "s/^/round $round ${v%%:*}: /" || status=1
        python3 -c "import json, sys; r = json.load(open(sys.argv[1]))['results'][0]; print('  registers', [x[1] for k in r['statistics'].values() for x in k if x[0] == 'Register Count'])" \
          "$out/warps-$round-${v%%:*}.json" || status=1
      done
    done
    exit $status
    ;;
  int8-inflight)
    # int8 decode with half products at D128 kv 65536 (B1, and B8 kv 16384): the plan (8 lanes of 16
    # codes, 4 steps) against more steps in flight on narrower lanes (16 lanes of 8 codes with 8 and 16
    # steps, 32 lanes of 4 with 16), 8 lanes of two 8-code loads with 8 steps, and 4 subgroups of 16
    # lanes with 16 steps and 32 splits; two rounds, each variant in a process of its own, the
    # driver's register counts beside each time.
    on_device
    status=0
    json_variants int8-inflight plan k2-v8-u8:FA_DECODE_KEYS_PER_WARP=2,FA_DECODE_VEC=8,FA_DECODE_UNROLL=8 \
      k2-v8-u16:FA_DECODE_KEYS_PER_WARP=2,FA_DECODE_VEC=8,FA_DECODE_UNROLL=16 \
      k1-v4-u16:FA_DECODE_KEYS_PER_WARP=1,FA_DECODE_VEC=4,FA_DECODE_UNROLL=16 \
      k4-v8-u8:FA_DECODE_KEYS_PER_WARP=4,FA_DECODE_VEC=8,FA_DECODE_UNROLL=8 \
      w4-s32-k2-v8-u16:FA_DECODE_WARPS=4,FA_DECODE_SPLIT_K=32,FA_DECODE_KEYS_PER_WARP=2,FA_DECODE_VEC=8,FA_DECODE_UNROLL=16
    exit $status
    ;;
  int8-w16)
    # int8 decode with half products at D128 kv 65536 (B1, and B8 kv 16384) in workgroups of 16
    # subgroups: 512 invocations leave a lane at most 128 registers (the plan's 8 subgroups take 254),
    # so an SM holds 16 subgroups where it holds 8, twice the loads in flight and the latency of each
    # dependent instruction hidden by twice the subgroups. Against the plan; two rounds, each variant a
    # process of its own, the driver's registers and spills beside each time.
    on_device
    status=0
    json_variants int8-w16 plan w16:FA_DECODE_WARPS=16 \
      w16-k4-v16-u4:FA_DECODE_WARPS=16,FA_DECODE_KEYS_PER_WARP=4,FA_DECODE_VEC=16,FA_DECODE_UNROLL=4 \
      w16-k4-v16-u2:FA_DECODE_WARPS=16,FA_DECODE_KEYS_PER_WARP=4,FA_DECODE_VEC=16,FA_DECODE_UNROLL=2 \
      w16-k2-v8-u4:FA_DECODE_WARPS=16,FA_DECODE_KEYS_PER_WARP=2,FA_DECODE_VEC=8,FA_DECODE_UNROLL=4 \
      w16-k2-v8-u8:FA_DECODE_WARPS=16,FA_DECODE_KEYS_PER_WARP=2,FA_DECODE_VEC=8,FA_DECODE_UNROLL=8
    SHAPES="decode:1:32:8:65536:128 decode:8:32:8:16384:128" json_variants f16-w16 plan w16:FA_DECODE_WARPS=16
    exit $status
    ;;
  int8-dot)
    # int8 and q8_0 decode with K's codes through integer dot products (FOUNDRY_FA_DECODE_INT8_DOT: q
    # quantized per load to two bytes per element) against the plan's float products, and f16: the
    # quantized-format and decode-variant cases first, then two sweep rounds (registers in the JSON).
    on_device
    status=0
    suite_subset idot-tests '*DecodeVariants*:*Decode*KvFormat*:*KvPaged*'
    for round in 1 2; do
      timeout 200 foundry bench --sweep --runs 30 --shape decode:1:32:8:65536:128+int8 decode:8:32:8:16384:128+int8 \
        decode:1:32:8:65536:128+q8_0 decode:1:32:8:65536:128 --variants "w8 k4 v16 u4 idot" "w8 k2 v8 u8 idot" \
        "w8 k4 v8 u4 idot" "w8 k4 v16 u2 idot" "w4 k4 v16 u4 idot" "w8 k2 v8 u4 idot" --json "$out/idot-$round.json" \
        2>&1 | grep "\]: .*us$" | sed "s/^/round $round: /" || status=1
    done
    exit $status
    ;;
  prefill-tune)
    # Causal prefill at S 2048 (issue 18's 250 us at D128, 150 us at D64): the plan against each one-knob
    # change the Selector chose between, three rounds in alternation. Further arguments replace the
    # variants (NAME:KNOB=VALUE,...); PREFILL_SHAPES the shapes.
    on_device
    status=0
    gpu_name
    read -r -a shapes <<<"${PREFILL_SHAPES:-prefill:1:32:8:2048:128 prefill:1:32:8:2048:64}"
    shift
    variants=("$@")
    [ ${#variants[@]} -gt 0 ] ||
      variants=(split2:FA_PREFILL_SPLIT_K=2 split4:FA_PREFILL_SPLIT_K=4 bc64:FA_PREFILL_KEYS_PER_TILE=64
                stages1:FA_PREFILL_STAGES=1 tiles-in-turn:FA_PREFILL_HEADS_FIRST=0 loader:FA_PREFILL_LOADER=1
                w4:FA_PREFILL_WARPS=4)
    time_variants 3 170 prefill-tune.txt
    exit $status
    ;;
  against-base)
    # A change against the build before it: the attention cases matching TESTS (all by default), then
    # SHAPES timed with .device/bin/foundry-base and .device/bin/foundry, interleaved, twice. Here: pack
    # the new build, then cp <the base build's foundry> .device/bin/foundry-base; or, for a change to
    # kernels/ alone, BASE_KERNELS=<a copy of the base's kernels/ under .device> (the new binary run
    # with FOUNDRY_KERNEL_DIR there). PROBE_SHAPES: also each build's decode probe of those shapes.
    on_device
    status=0
    suite_subset against-base-tests "${TESTS:-*}"
    read -r -a shapes <<<"${SHAPES:?SHAPES names the shapes to time}"
    base=.device/bin/foundry-base
    [ -n "${BASE_KERNELS:-}" ] && base=.device/bin/foundry:$PWD/$BASE_KERNELS
    bash bench/interleave.sh "${shapes[@]}" -- "base=$base" new=.device/bin/foundry || status=1
    if [ -n "${PROBE_SHAPES:-}" ]; then
      read -r -a probed <<<"$PROBE_SHAPES"
      for spec in "base=$base" new=.device/bin/foundry; do
        bin=${spec#*=} dir=""
        [ "${bin%%:*}" != "$bin" ] && dir=${bin#*:} bin=${bin%%:*}
        timeout 120 env ${dir:+FOUNDRY_KERNEL_DIR=$dir} "$bin" bench --probe --runs 30 --shape "${probed[@]}" 2>&1 |
          grep -E "us$|probe:|rror" | sed "s/^/${spec%%=*}: /" || status=1
      done
    fi
    exit $status
    ;;
  nonfinite)
    # The NaN and Inf policy (docs/reliability.md, "NaN and Inf in the inputs") on the GPU's own kernels:
    # the cases of TESTS in SHARDS shards at once (the tensor-core and cooperative-matrix variants run only
    # here), then SHAPES timed with the new kernels against BASE_KERNELS (a copy of the base's kernels/
    # under .device), interleaved, ROUNDS times.
    on_device
    gpu_name
    status=0
    attention_shards nonfinite "${SHARDS:-4}" \
      "${TESTS:-*NonFinite*:*KvFormatParity*:*LseParity*:*Merge*:*DecodeVariants*_tc*:*PrefillVariants*:*ModifierEdges*}" \
      "${SUITE_LIMIT_S:-300}" || status=1
    read -r -a shapes <<<"${SHAPES:?SHAPES names the shapes to time}"
    bash bench/interleave.sh "${shapes[@]}" -- "base=.device/bin/foundry:$PWD/${BASE_KERNELS:?}" new=.device/bin/foundry ||
      status=1
    exit $status
    ;;
  prefill-candidates)
    # D80 decode with idle lanes in 8-byte loads over 8 lanes (the row laid out as D96's, 4 of 24
    # loads idle) against the plan, twice; then kernel-source candidates for the cooperative-matrix
    # prefill (bench/prefill_ablation.sh: Q scaled as staged, -inf masks, both, a tile's accumulators
    # built together; EDITS picks) against the committed kernel, interleaved, twice.
    on_device
    status=0
    gpu_name
    read -r -a shapes <<<"${PREFILL_SHAPES:-prefill:1:32:8:8192:128 prefill:1:32:8:8192:64 prefill:1:32:8:2048:128}"
    sweep_rounds 120 d80-idle "" decode:1:32:8:65536:80 "w8 k4 v4 u2 il qs" "w8 k4 v4 u4 il qs" "w8 k4 v4 u8 il qs" \
      "w8 k4 v4 u4 il" "w8 k4 v4 u2 il"
    EDITS="${EDITS:-q_scaled neg_inf less_math n_inner}" \
      bash bench/prefill_ablation.sh "${shapes[@]}" || status=1
    exit $status
    ;;
  group-rows)
    # Decode as a prefill of each KV head's GQA group (FOUNDRY_FA_DECODE_GROUP_ROWS: the group's query
    # heads as the rows of one query, on the cooperative-matrix prefill) against the decode kernels: the
    # group-rows parity cases first, then the plan and each variant NAME:KNOB=VALUE,... (further
    # arguments replace the defaults) over GROUP_SHAPES, ROUNDS rounds in alternation.
    on_device
    status=0
    suite_subset group-rows-tests '*GroupRows*'
    read -r -a shapes <<<"${GROUP_SHAPES:-decode:1:32:8:65536:128 decode:1:32:8:65536:128+int8 decode:1:32:8:65536:80 decode:8:32:8:16384:128}"
    shift
    variants=("$@")
    [ ${#variants[@]} -gt 0 ] ||
      variants=(gr:FA_DECODE_GROUP_ROWS=1 gr-s64:FA_DECODE_GROUP_ROWS=1,FA_PREFILL_SPLIT_K=64
                gr-s128:FA_DECODE_GROUP_ROWS=1,FA_PREFILL_SPLIT_K=128 gr-s256:FA_DECODE_GROUP_ROWS=1,FA_PREFILL_SPLIT_K=256
                gr-s128-bc64:FA_DECODE_GROUP_ROWS=1,FA_PREFILL_SPLIT_K=128,FA_PREFILL_KEYS_PER_TILE=64
                gr-s128-st1:FA_DECODE_GROUP_ROWS=1,FA_PREFILL_SPLIT_K=128,FA_PREFILL_STAGES=1)
    time_variants "${ROUNDS:-1}" 100 group-rows.txt --runs 20
    exit $status
    ;;
  mla-heads)
    # DeepSeek-V2-Lite's latent decode (16 heads on one 576-wide KV head) with fewer heads per
    # workgroup, more keys per subgroup step and wider loads: two layers after a 4096-token prompt,
    # decode GPU time (a knob set the register model refuses prints its error instead).
    on_device
    for h in auto 8 4 2 1; do
      for k in auto 2; do
        for v in auto 4; do
          env=()
          [ "$h" = auto ] || env+=(FOUNDRY_FA_DECODE_HEADS=$h)
          [ "$k" = auto ] || env+=(FOUNDRY_FA_DECODE_KEYS_PER_WARP=$k)
          [ "$v" = auto ] || env+=(FOUNDRY_FA_DECODE_VEC=$v)
          line=$(env "${env[@]}" timeout 60 foundry run configs/deepseek-v2-lite.json --layers 2 --prompt-len 4096 \
            --decode-tokens 64 --no-check 2>&1 | grep -E "^  decode |FlashDecode|error" | tr -s ' ' | tr '\n' ' ' || true)
          echo "heads $h keys $k vec $v: $line" | tee -a "$out/mla-heads.txt"
        done
      done
    done
    ;;
  sweep)
    # Every variant the knobs can force, for the shapes given (the Selector's defaults come from this):
    #   run carry=[".device"] command="bash bench/h200.sh sweep decode:1:32:8:16384:128 ..."
    shift
    on_device
    foundry bench --sweep --shape "$@" --json "$out/sweep.json" 2>&1 | tee "$out/sweep.txt"
    # The same results with the driver's register, spill and shared-memory counts per variant.
    python3 bench/sweep_table.py "$out/sweep.json" | tee "$out/sweep.md"
    ;;
  merge)
    # Split-K factor x how the splits are merged (last workgroup, or a reduce kernel), each measured
    # twice with the two modes interleaved, for the shapes given:
    #   run carry=[".device"] command="bash bench/h200.sh merge decode:8:32:8:16384:128 ..."
    shift
    on_device
    for rep in 1 2; do
      for fused in 1 0; do
        foundry --set "FOUNDRY_FA_DECODE_FUSED_REDUCE=$fused" bench --sweep --shape "$@" \
          --variants "split 2" "split 4" "split 8" "split 16" "split 32" --json "$out/merge-$fused-$rep.json" 2>&1 |
          grep -v '^ ' | tee -a "$out/merge.txt"
      done
    done
    ;;
  modifiers)
    # Attention modifiers. First the whole attention suite on this GPU, the modifier parity suites
    # with it: the cooperative-matrix variants run only here.
    on_device
    status=0
    attention_suite || status=1
    bash "$0" replays || status=1
    foundry bench --suite modifiers --json "$out/modifiers.json" 2>&1 | tee "$out/modifiers.txt" || status=1
    python3 bench/modifier_table.py "$out/modifiers.json" | tee "$out/modifiers.md"
    exit $status
    ;;
  prefill-order)
    # Prefill dispatch order and the per-lane row sums (issue 18): the attention suite first (the
    # cooperative-matrix path runs only here), then causal prefill timed with three builds
    # interleaved, twice: .device/bin/foundry-base (query tiles reversed per head, sums reduced per
    # tile), the new binary with .device/kernels-order (longest tiles of every head first, sums
    # reduced per tile) and the new binary as built (both). `prepare` and then, here:
    #   cp <base build's foundry> .device/bin/foundry-base; cp -r kernels .device/kernels-order
    #   and undo the sum change in .device/kernels-order/flashattention/prefill_coopmat.glsl.
    on_device
    status=0
    attention_suite || status=1
    bash bench/interleave.sh prefill:1:32:8:8192:128 prefill:1:32:8:2048:128 prefill:1:32:8:8192:64 \
      prefill:1:32:8:2048:64 prefill:1:32:8:8192:256 prefill:1:32:8:8192:96 prefill:4:32:8:2048:128 -- \
      base=.device/bin/foundry-base order=.device/bin/foundry:.device/kernels-order both=.device/bin/foundry
    exit $status
    ;;
  probe)
    # The prefill probe (issue 18): its parity cases and the cooperative-matrix prefill variants on
    # this GPU, then causal prefill timed and probed (workgroups per SM at once, idle SMs, the cycles
    # of each phase) with the Selector's plan and with other tilings. Each further argument is a
    # variant, NAME:KNOB=VALUE,KNOB=VALUE (the knobs without FOUNDRY_); without any, the tilings that
    # could share an SM: 4 subgroups with one 64-key staging buffer (35 KiB) or two of 32 keys
    # (35 KiB), and 8 subgroups with two of 32 keys. PROBE_SHAPES overrides the shapes.
    on_device
    status=0
    gpu_name
    .device/bin/foundry_attention_tests --gtest_brief=1 --gtest_filter='*PrefillProbe*:*PrefillVariants*' \
      >"$out/probe-tests.log" 2>&1 || { echo "FAILED: probe tests"; status=1; }
    tail -3 "$out/probe-tests.log"
    read -r -a shapes <<<"${PROBE_SHAPES:-prefill:1:32:8:8192:128 prefill:1:32:8:2048:128 prefill:1:32:8:512:128 prefill:1:32:8:8192:64}"
    shift
    variants=("$@")
    [ ${#variants[@]} -gt 0 ] ||
      variants=(w4-bc64-s1:FA_PREFILL_WARPS=4,FA_PREFILL_KEYS_PER_TILE=64
                w4-bc32:FA_PREFILL_WARPS=4,FA_PREFILL_KEYS_PER_TILE=32
                w8-bc32:FA_PREFILL_WARPS=8,FA_PREFILL_KEYS_PER_TILE=32)
    for v in plan "${variants[@]}"; do
      name=${v%%:*}
      variant_sets "$v"
      echo "== $name"
      foundry "${sets[@]}" bench --probe --json "$out/probe-$name.json" --shape "${shapes[@]}" |
        grep -v '^[-| ]*$' || status=1
    done
    exit $status
    ;;
  wide-rows)
    # Issue 15 (2026-11-26): 256- and 192-wide prefill rows, and decode rows that no power-of-two cluster
    # divides. The prefill, decode and head-dim parity cases first; then causal prefill with the plan and
    # each further argument as a variant (NAME:KNOB=VALUE,..., knobs without FOUNDRY_) over WIDE_SHAPES,
    # D128 among them for the TFLOP/s ratio; with WIDE_DECODE=1 also D80 and D96 decode with lane
    # clusters wider than the row (idle lanes) against the plan, twice.
    on_device
    status=0
    suite_subset wide-tests '*PrefillVariants*:*DecodeVariants*:*HeadDim*:*KvFormat*'
    read -r -a shapes <<<"${WIDE_SHAPES:-prefill:1:32:8:8192:256 prefill:1:32:8:2048:256 prefill:1:32:8:8192:192 prefill:1:32:8:8192:128 prefill:1:32:8:8192:96}"
    shift
    for v in plan "$@"; do
      variant_sets "$v"
      timeout 170 foundry "${sets[@]}" bench --shape "${shapes[@]}" --json "$out/wide-${v%%:*}.json" 2>&1 |
        grep "causal:" | sed "s/^/${v%%:*}: /" || status=1
    done
    if [ "${WIDE_DECODE:-0}" = 1 ]; then
      for round in 1 2; do
        timeout 140 foundry bench --sweep --runs 30 --shape decode:1:32:8:65536:80 --variants "w8 k8 v4 u2 qs" \
          "w8 k2 v8 u4 il" "w8 k2 v8 u8 il" "w8 k2 v8 u16 il qs" "w8 k4 v8 u4 il" "w8 k1 v8 u8 il" "w4 k2 v8 u8 il" \
          --json "$out/d80-$round.json" 2>&1 | grep "us$" | sed "s/^/d80 round $round: /" || status=1
      done
      timeout 100 foundry bench --sweep --runs 30 --shape decode:1:32:8:65536:96 --variants "w8 k2 v8 u8 il" \
        "w8 k4 v8 u4 il" --json "$out/d96.json" 2>&1 | grep "us$" | sed "s/^/d96: /" || status=1
    fi
    exit $status
    ;;
  tail-words)
    # Issue 15 (2026-11-27): decode rows whose lanes take whole loads and then single 4-byte words
    # (FOUNDRY_FA_DECODE_TAIL_WORDS; D80 over 8 lanes: one 16-byte load and one word each, no lane idle)
    # against the plan. The decode parity cases first, then two rounds of each sweep.
    on_device
    status=0
    suite_subset tail-tests '*DecodeVariants*:*Decode*KvFormat*:*HeadDim*'
    tail_sweep() { sweep_rounds 150 "tail-$1" "" "${@:2}"; }
    tail_sweep d80 decode:1:32:8:65536:80 "w8 k4 v4 u4 il" "w8 k4 v8 u2 tw" "w8 k4 v8 u4 tw" "w8 k4 v8 u8 tw" \
      "w8 k4 v8 u4 tw qs" "w8 k4 v8 u8 tw qs" "w8 k4 v4 u4 tw" "w8 k4 v4 u8 tw qs" "w8 k8 v8 u2 tw" "w8 k8 v8 u4 tw qs" \
      "w4 k4 v8 u8 tw"
    tail_sweep d80b8 decode:8:32:8:16384:80 "w8 k4 v4 u4 il" "w8 k4 v8 u4 tw" "w8 k4 v8 u8 tw" "w8 k4 v8 u8 tw qs"
    tail_sweep d96 decode:1:32:8:65536:96 "w8 k4 v4 u4 qs" "w8 k4 v8 u4 tw" "w8 k4 v8 u8 tw qs" "w8 k4 v8 u4 tw qs"
    exit $status
    ;;
  tail-words-tune)
    # The best tail-word split of the first call (8 lanes of 10 elements: two 8-byte loads and a word,
    # 4 steps, q in registers) with other split counts, subgroups and heads per workgroup, and at batch 8
    # and shorter ranges, against the idle-lane plan; two rounds each.
    on_device
    status=0
    gpu_name
    tune_sweep() { sweep_rounds 100 "tune-$1" "${@:2}"; }
    tune_sweep d80 "" decode:1:32:8:65536:80 "w8 k4 v4 u4 il" "w8 k4 v4 u4 tw" "w8 k4 v4 u2 tw" "w8 k4 v4 u4 h2 tw" \
      "w8 k4 v4 u4 h2 tw qs" "w4 k4 v4 u4 tw" "w4 k4 v4 u8 tw qs"
    for splits in 8 24 32; do
      tune_sweep "d80-s$splits" "--set FA_DECODE_SPLIT_K=$splits" decode:1:32:8:65536:80 "w8 k4 v4 u4 il" \
        "w8 k4 v4 u4 tw" "w4 k4 v4 u4 tw" "w8 k4 v4 u4 h2 tw"
    done
    tune_sweep d80-half "--set FA_DECODE_TG_OUT=half" decode:1:32:8:65536:80 "w8 k4 v4 u4 tw"
    tune_sweep d80b8 "" decode:8:32:8:16384:80 "w8 k4 v4 u4 il" "w8 k4 v4 u4 tw" "w8 k4 v4 u4 tw qs"
    tune_sweep d80bf16 "" decode:1:32:8:65536:80+bf16 "w8 k4 v4 u4 il" "w8 k4 v4 u4 tw"
    tune_sweep d80short "" "decode:1:32:8:16384:80" "w8 k8 v4 u2 qs" "w8 k4 v4 u4 tw" "w8 k4 v4 u2 tw" "w8 k4 v4 u2 tw qs"
    exit $status
    ;;
  tail-words-probe)
    # The tail-word D80 plan's registers (the driver's statistics) and time against variants with more
    # K/V in flight per compute unit: q shared with 8 steps, 16 subgroups, 2 heads per workgroup.
    on_device
    status=0
    gpu_name
    variants=(qs:FA_DECODE_Q_SHARED=1 qs-u8:FA_DECODE_Q_SHARED=1,FA_DECODE_UNROLL=8 w16:FA_DECODE_WARPS=16
              w16-qs:FA_DECODE_WARPS=16,FA_DECODE_Q_SHARED=1
              w16-h2-qs:FA_DECODE_WARPS=16,FA_DECODE_HEADS=2,FA_DECODE_Q_SHARED=1
              h2:FA_DECODE_HEADS=2 h2-s32:FA_DECODE_HEADS=2,FA_DECODE_SPLIT_K=32)
    driver_stats 80 "" plan "${variants[@]}"
    shapes=(decode:1:32:8:65536:80 decode:8:32:8:16384:80)
    time_variants 2 60 tail-probe.txt --runs 30
    exit $status
    ;;
  scatter)
    # Issue 15 (2026-11-27): decode scores summed once per key and each weighed by one lane group
    # (FOUNDRY_FA_DECODE_SCATTER) against the plan: the registers of each plan with and without it
    # (the driver's statistics), two rounds of each sweep (a name runs every variant it is part of:
    # "w8 k4 v4 u4 tw" runs "... tw sc" too), then the decode parity cases. SWEEPS: which sweeps (all
    # but d64 by default).
    on_device
    status=0
    gpu_name
    for d in 80 128; do driver_stats "$d" "D$d " plan sc:FA_DECODE_SCATTER=1; done
    sc_sweep() {
      if [[ " ${SWEEPS:-d80 d80b8 d80bf16 d96 d128 int8} " == *" $1 "* ]]; then sweep_rounds 150 "sc-$1" "" "${@:2}"; fi
    }
    sc_sweep d80 decode:1:32:8:65536:80 "w8 k4 v4 u4 tw" "w8 k4 v4 u8 tw qs sc" "w8 k4 v8 u4 tw sc"
    sc_sweep d80b8 decode:8:32:8:16384:80 "w8 k4 v4 u4 tw sc"
    sc_sweep d80bf16 decode:1:32:8:65536:80+bf16 "w8 k4 v4 u4 tw sc"
    sc_sweep d96 decode:1:32:8:65536:96 "w8 k4 v4 u4 qs" "w8 k4 v4 u4 sc" "w8 k4 v8 u8 qs sc"
    sc_sweep d128 decode:1:32:8:65536:128 "w8 k2 v4 u4 sc" "w8 k2 v8 u4 sc" "w8 k2 v8 u8 sc"
    sc_sweep int8 decode:1:32:8:65536:128+int8 "w8 k4 v16 u4 sc" "w8 k2 v8 u4 sc" "w8 k2 v8 u8 sc" "w8 k8 v16 u4 sc" \
      "w8 k8 v16 u2 sc"
    sc_sweep d64 decode:1:32:8:65536:64 "w8 k4 v4 u4 sc" "w8 k4 v8 u4 sc" "w8 k2 v4 u4 sc"
    [ -n "${SKIP_TESTS:-}" ] || suite_subset scatter-tests '*DecodeVariants*:*ModifierVariants*decode_*'
    exit $status
    ;;
  decode-dims)
    # Issue 15, "every head dim": the Selector's decode plan at each multiple of 8 from 32 to 256 (Hq 32,
    # Hkv 8, kv 65536), then with tail words forced at the dims where they plan, then D112's splits.
    # The plan's run reached D208 in its 250 s on 2026-11-27: DIMS="..." takes the rest in another call.
    on_device
    status=0
    gpu_name
    plan=() words=()
    for d in ${DIMS:-$(seq 32 8 256)}; do
      plan+=("decode:1:32:8:65536:$d")
      foundry --set FA_DECODE_TAIL_WORDS=1 kernels --heads 32 --kv-heads 8 --head-dim "$d" >/dev/null 2>&1 &&
        words+=("decode:1:32:8:65536:$d")
    done
    timeout 250 foundry bench --json "$out/dims-plan.json" --shape "${plan[@]}" 2>&1 |
      grep -E "us$|rror" | sed "s/^/plan: /" || status=1
    timeout 200 foundry --set FA_DECODE_TAIL_WORDS=1 bench --json "$out/dims-words.json" --shape "${words[@]}" 2>&1 |
      grep -E "us$|rror" | sed "s/^/tail words: /" || status=1
    timeout 120 foundry bench --sweep --runs 30 --shape decode:1:32:8:65536:112 --json "$out/d112.json" --variants \
      "w8 k4 v4 u4 tw" "w8 k4 v8 u4 il" "w8 k4 v4 u4 il" "w8 k8 v4 u2 tw" 2>&1 | grep -E "us$|rror" | sed "s/^/D112: /" || status=1
    exit $status
    ;;
  decode-probe)
    # Issue 15: where a decode call's fixed cost goes (11.3 us of D80's 51.4 at kv 65536, "The Split-K
    # merge's loads" in docs/performance.md). The decode probe's parity cases, then the shapes (PROBE_SHAPES)
    # timed and run through the probe's build (FOUNDRY_FA_DECODE_PROBE; warm, the last of several calls): each workgroup's setup,
    # stream, hand-over and merge, and how far apart the splits start and end, in device-clock ticks.
    on_device
    status=0
    suite_subset decode-probe-tests '*DecodeProbe*'
    default="decode:1:32:8:65536:80 decode:1:32:8:65536:128 decode:1:32:8:65536:64 decode:1:32:8:4096:128"
    read -r -a shapes <<<"${PROBE_SHAPES:-$default decode:8:32:8:16384:128}"
    for round in 1 2; do
      timeout 200 foundry bench --probe --json "$out/decode-probe-$round.json" --shape "${shapes[@]}" 2>&1 |
        grep -E "us$|probe:|rror" | sed "s/^/round $round: /" || status=1
    done
    exit $status
    ;;
  coopmat2)
    # Issue 18, item 6: prefill on workgroup-scope cooperative matrices (GL_NV_cooperative_matrix2),
    # compiled by Debian 13's glslc (scripts/newer-compilers.sh; `prepare` packs it as .device/compilers).
    # The prefill variant cases (coopmat2 among them) first; then causal prefill, the plan (subgroup-
    # scope matrices) against coopmat2 tilings, twice in alternation. Each further argument is a variant
    # NAME:KNOB=VALUE,... (knobs without FOUNDRY_); COOPMAT2_SHAPES overrides the shapes.
    on_device
    status=0
    export FOUNDRY_GLSLC=$PWD/.device/compilers/bin/glslc
    gpu_name
    foundry devices | tee "$out/devices.txt"
    .device/bin/foundry_attention_tests --gtest_brief=1 --gtest_filter='*PrefillVariants*:*LseOutput*' \
      >"$out/coopmat2-tests.log" 2>&1 || { echo "FAILED: prefill variant tests"; status=1; }
    grep -E "FAILED|SKIPPED|PASSED" "$out/coopmat2-tests.log" | tail -25
    read -r -a shapes <<<"${COOPMAT2_SHAPES:-prefill:1:32:8:8192:128 prefill:1:32:8:2048:128 prefill:1:32:8:512:128 prefill:1:32:8:8192:64 prefill:1:32:8:2048:64}"
    shift
    variants=("$@")
    # The same glslc with spirv-opt (-O), for a variant that sets GLSLC=/tmp/glslc-O.
    printf '#!/bin/sh\nexec %s -O "$@"\n' "$FOUNDRY_GLSLC" >/tmp/glslc-O && chmod +x /tmp/glslc-O
    [ ${#variants[@]} -gt 0 ] ||
      variants=(cm2-s0-w4-bc32:FA_PREFILL_COOPMAT2=1,FA_PREFILL_STAGES=0,FA_PREFILL_WARPS=4,FA_PREFILL_KEYS_PER_TILE=32
                cm2-s0-w4-bc64:FA_PREFILL_COOPMAT2=1,FA_PREFILL_STAGES=0,FA_PREFILL_WARPS=4,FA_PREFILL_KEYS_PER_TILE=64
                cm2-s0-w2-bc64:FA_PREFILL_COOPMAT2=1,FA_PREFILL_STAGES=0,FA_PREFILL_WARPS=2,FA_PREFILL_KEYS_PER_TILE=64
                cm2-s2-w4-bc32:FA_PREFILL_COOPMAT2=1,FA_PREFILL_STAGES=2,FA_PREFILL_WARPS=4,FA_PREFILL_KEYS_PER_TILE=32)
    for round in 1 2; do
      for v in plan "${variants[@]}"; do
        name=${v%%:*}
        variant_sets "$v"
        echo "== $name (round $round)"
        foundry "${sets[@]}" bench --json "$out/coopmat2-$name-$round.json" --shape "${shapes[@]}" |
          grep -v '^[-| ]*$' || status=1
      done
    done
    exit $status
    ;;
  bf16-prefill)
    # bf16 prefill on coopmat2 matrices with bf16 operands (VK_KHR_shader_bfloat16, GL_EXT_bfloat16),
    # compiled by the glslc scripts/newer-compilers.sh makes (`prepare coopmat2` packs it): what the
    # driver lists, the parity cases (BF16_TESTS; SKIP_TESTS=1: none), then causal prefill, bf16 as
    # planned against f16 and against bf16 tilings (further arguments NAME:KNOB=VALUE,...), ROUNDS
    # rounds (2) over BF16_SHAPES; bf16 on the subgroup kernel (no bf16 operands: FOUNDRY_GLSLC empty)
    # once over BF16_SUBGROUP_SHAPES; PyTorch's flash SDPA in bf16 and f16 (SKIP_TORCH=1: not); the bf16
    # replays of Llama 3.1 8B and gpt-oss-20b (its window and sinks past 128 tokens) with --check
    # (SKIP_REPLAYS=1: not).
    on_device
    status=0
    export FOUNDRY_GLSLC=$PWD/.device/compilers/bin/glslc
    gpu_name
    FOUNDRY_LOG_LEVEL=debug foundry devices >"$out/devices.txt" 2>&1 || status=1
    grep -E "flexible-dimension|compiler|pretend" "$out/devices.txt" | sort -u | head -40
    if [ -z "${SKIP_TESTS:-}" ]; then
      .device/bin/foundry_attention_tests --gtest_brief=1 \
        --gtest_filter="${BF16_TESTS:-Prefill*/KvFormat*:*PrefillVariants*:*LseOutput*}" >"$out/bf16-tests.log" 2>&1 ||
        { echo "FAILED: the parity cases"; status=1; }
      grep -E "FAILED|PASSED|tests ran|Failure" "$out/bf16-tests.log" | tail -30
      echo "skipped: $(grep -c "^\[  SKIPPED" "$out/bf16-tests.log" || true)"
    fi
    read -r -a shapes <<<"${BF16_SHAPES:-prefill:1:32:8:8192:128+bf16 prefill:1:32:8:8192:128 prefill:1:32:8:2048:128+bf16 prefill:1:32:8:2048:128 prefill:1:32:8:8192:64+bf16 prefill:1:32:8:8192:64}"
    shift
    variants=("$@")
    time_variants "${ROUNDS:-2}" 300 bf16-prefill.txt
    # shellcheck disable=SC2086  # BF16_SUBGROUP_SHAPES is words
    FOUNDRY_GLSLC= foundry bench --shape ${BF16_SUBGROUP_SHAPES:-prefill:1:32:8:2048:128+bf16} 2>&1 | grep -E "us$|rror" |
      sed "s/^/bf16 on the subgroup kernel (no glslc for bf16 operands): /" || status=1
    [ -n "${SKIP_TORCH:-}" ] || timeout 120 python3 bench/torch_formats.py prefill:1:8192:8192:bf16 \
      prefill:1:8192:8192:f16 prefill:1:2048:2048:bf16 prefill:1:2048:2048:f16 | tee "$out/torch-prefill.jsonl" || status=1
    [ -n "${SKIP_REPLAYS:-}" ] && exit $status
    bash bench/h200.sh formats-replay || status=1
    {
      python3 bench/replay_torch.py configs/gpt-oss-20b.json --layers 2 --prompt-len 300 --decode-tokens 8 --dtype bf16 \
        --out /tmp/replay-bf16-long >/dev/null &&
        foundry run /tmp/replay-bf16-long/config.json --layers 2 --prompt-len 300 --decode-tokens 8 --dtype bf16 \
          --inputs /tmp/replay-bf16-long/inputs.safetensors --expect /tmp/replay-bf16-long/expect.safetensors --check
    } >"$out/replay-bf16-long.txt" 2>&1 || { status=1; echo "gpt-oss-20b bf16 replay, prompt 300: FAILED"; }
    tail -5 "$out/replay-bf16-long.txt"
    exit $status
    ;;
  replays)
    # Replays against PyTorch's own math (masks, soft-cap and ALiBi on the scores, sinks as a dropped
    # softmax column): gpt-oss-20b (a 128-key window on even layers, sinks, YaRN) past its window,
    # MPT-7B (ALiBi, no RoPE), and Gemma 2's soft-cap, window and scale at head_dim 128.
    on_device
    status=0
    replay() {  # name config layers prompt-len decode-tokens [more replay flags]
      local name=$1 cfg=$2 run=(--layers "$3" --prompt-len "$4" --decode-tokens "$5")
      shift 5
      python3 bench/replay_torch.py "$cfg" --out "/tmp/replay-$name" "${run[@]}" "$@" &&
        foundry run "/tmp/replay-$name/config.json" --dtype f16 --check "${run[@]}" \
          --inputs "/tmp/replay-$name/inputs.safetensors" --expect "/tmp/replay-$name/expect.safetensors" ||
        { status=1; echo "replay $name: FAILED"; }
    }
    {
      replay gpt-oss configs/gpt-oss-20b.json 2 300 8
      replay mpt configs/mpt-7b.json 2 64 8
      replay gemma2-d128 configs/gemma-2-9b.json 2 160 8 --head-dim 128 --window 64
    } 2>&1 | grep -v '^progress' | tee "$out/modifier-replay.txt"
    grep -q FAILED "$out/modifier-replay.txt" && status=1
    exit $status
    ;;
  cp)
    # Context-parallel decode (docs/distributed.md) in one call: one Llama-3.1-70B layer's f16 K/V
    # cache (64 query heads, 8 KV heads, D 128, batch 1) at 128K, 512K and 1M keys, on one GPU with
    # FlashAttentionStep alone (--direct), and sharded over 1, 2, 4 and 8 ranks (as many as there are
    # GPUs), each rank on its own GPU. Every run checks its result at a small context before timing.
    # A context runs on one GPU only where its cache fits (the cache bytes against the GPU's memory
    # and each K or V tensor against the 4 GiB storage-buffer range).
    several_gpus
    mem=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)  # MiB
    heads=64 kv=8 dim=128 tokens=${CP_TOKENS:-50}
    : >"$out/cp.jsonl"
    for context in ${CP_CONTEXTS:-131072 524288 1048576}; do
      for ranks in direct 1 2 4 8; do
        n=$ranks; [ "$ranks" = direct ] && n=1
        [ "$n" -le "$gpus" ] || continue
        keys=$(((context + n - 1) / n))
        tensor=$((kv * keys * dim * 2))  # bytes of one f16 K (or V) shard
        if [ $((2 * tensor)) -gt $((mem * 1024 * 1024 * 9 / 10)) ] || [ "$tensor" -ge $((4 << 30)) ]; then
          echo "context $context on $n GPU(s): $((2 * tensor >> 20)) MiB of cache per GPU does not fit; skipped"
          continue
        fi
        flags=(--context "$context" --heads "$heads" --kv-heads "$kv" --head-dim "$dim" --batch 1 --tokens "$tokens")
        [ "$ranks" = direct ] && flags+=(--direct)
        # Over several GPUs, both divisions of the cache: by positions, and by KV heads.
        for shard in positions heads; do
          [ "$shard" = heads ] && { [ "$n" -gt 1 ] || continue; }
          echo "== context $context, ranks $ranks, by $shard"
          mpirun -np "$n" .device/bin/foundry_cp_bench "${flags[@]}" --shard "$shard" >>"$out/cp.jsonl" \
            2>>"$out/cp.log" || { status=1; echo "FAILED: context $context ranks $ranks $shard"; tail -20 "$out/cp.log"; }
          tail -1 "$out/cp.jsonl" | cut -c1-300
        done
      done
    done
    python3 bench/cp_table.py "$out/cp.jsonl" --gpu "$(head -1 "$out/gpu.txt")" | tee "$out/cp.md"
    exit $status
    ;;
  ring)
    # Ring prefill (docs/distributed.md) in one call: one Llama-3.1-70B layer (64 query heads, 8 KV
    # heads, D 128, f16, causal) over RING_CONTEXT (131072) tokens on one GPU with FlashAttentionStep
    # alone (--direct), then over 2, 4 and 8 ranks (as many as there are GPUs), each with its own
    # GPU: causally balanced positions, and even ones at the most GPUs. Every run checks its rows at
    # 2048 tokens first.
    several_gpus
    context=${RING_CONTEXT:-131072}
    : >"$out/ring.jsonl"
    most=1
    for n in 2 4 8; do [ "$n" -le "$gpus" ] && most=$n; done
    runs=("1 direct" "2 balanced" "4 balanced" "8 balanced" "$most even")
    for run in "${runs[@]}"; do
      read -r n split <<<"$run"
      [ "$n" -le "$gpus" ] || continue
      [ "$n" -gt 1 ] || [ "$split" = direct ] || continue
      flags=(--prefill --context "$context" --heads 64 --kv-heads 8 --head-dim 128 --batch 1
             --tokens "${RING_ITERATIONS:-3}" --warmup 1)
      if [ "$split" = direct ]; then flags+=(--direct); else flags+=(--split "$split"); fi
      echo "== ring prefill $context, $n GPU(s), $split"
      mpirun -np "$n" .device/bin/foundry_cp_bench "${flags[@]}" >>"$out/ring.jsonl" 2>>"$out/ring.log" ||
        { status=1; echo "FAILED: $n $split"; tail -20 "$out/ring.log"; }
      tail -1 "$out/ring.jsonl" | cut -c1-400
    done
    python3 bench/ring_table.py "$out/ring.jsonl" --gpu "$(head -1 "$out/gpu.txt")" | tee "$out/ring.md"
    exit $status
    ;;
  ranks)
    # `mpirun -np N foundry run` (docs/distributed.md): Llama-3.1-70B's attention layout, one layer, a
    # RANKS_PROMPT (131056: with the 16 decode tokens, the model's 131072 context) token prompt and 16 decode tokens, on 1 GPU (the plain run) and over 2, 4
    # and 8 ranks (as many as there are GPUs); then the most GPUs on a shorter run with --check.
    several_gpus
    prompt=${RANKS_PROMPT:-131056}
    for n in 1 2 4 8; do
      [ "$n" -le "$gpus" ] || continue
      echo "== foundry run over $n GPU(s), prompt $prompt"
      mpirun -np "$n" .device/bin/foundry run configs/llama-3.1-70b.json --prompt-len "$prompt" --decode-tokens 16 \
        --layers 1 --no-check --json "$out/ranks-$n.json" >"$out/ranks-$n.txt" 2>>"$out/ranks.log" ||
        { status=1; echo "FAILED: $n GPU(s)"; tail -5 "$out/ranks.log"; }
      cat "$out/ranks-$n.txt"
    done
    echo "== checked: foundry run over $gpus GPU(s), prompt 8192, 2 layers"
    mpirun -np "$gpus" .device/bin/foundry run configs/llama-3.1-70b.json --prompt-len 8192 --decode-tokens 4 \
      --layers 2 --check >"$out/ranks-check.txt" 2>>"$out/ranks.log" || { status=1; echo "FAILED: the checked run"; }
    cat "$out/ranks-check.txt"
    exit $status
    ;;
  replay-check)
    # Decode replay with its outputs checked: Llama 3.1 8B (32 layers, 8192-token prompt, 128 tokens)
    # with FOUNDRY_DECODE_REPLAY=1 and =0, each with --check (the CPU reference on sampled layers and
    # tokens, NaN-poisoned outputs); both must pass.
    on_device
    status=0
    for replay in 1 0; do
      FOUNDRY_DECODE_REPLAY=$replay foundry run configs/llama-3.1-8b.json --layers 32 --prompt-len 8192 \
        --decode-tokens 128 --check --json "$out/replay-check$replay.json" >"$out/replay-check$replay.txt" 2>&1 \
        || { status=1; echo "replay=$replay: FAILED"; }
      echo "== FOUNDRY_DECODE_REPLAY=$replay"
      grep -E "phase|prefill |decode |replay:|check:" "$out/replay-check$replay.txt"
    done
    exit $status
    ;;
  replay)
    on_device
    attention_suite
    foundry run configs/llama-3.1-8b.json --layers 1 --prompt-len 64 --decode-tokens 2 >/dev/null  # warm the cache
    for round in 1 2 3; do
      for replay in 1 0; do
        FOUNDRY_DECODE_REPLAY=$replay foundry run configs/llama-3.1-8b.json --layers 32 --prompt-len 8192 \
          --decode-tokens 128 --json "$out/replay$replay-$round.json" >"$out/replay$replay-$round.txt" 2>&1
        python3 - "$out/replay$replay-$round.json" "$replay" "$round" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["decode"]
print(f"replay={sys.argv[2]} round {sys.argv[3]}: {r['tokens'] / r['wall_s']:.1f} decode tokens/s (wall), "
      f"{r['tokens_per_s'] or 0:.0f} tokens/s (attention GPU time), {r['recordings']} recorded, {r['replays']} replayed")
PY
      done
    done | tee "$out/replay.txt"
    ;;
  report)
    dir=${2:?usage: bench/h200.sh report DIR}
    # A `peers` call's directory has llama.cpp's timings too.
    peers=()
    [ -f "$dir/ggml.jsonl" ] && peers=(--ggml "$dir/ggml.jsonl" --device-command "bash bench/h200.sh peers")
    python3 bench/compare.py "$dir/bench.json" "$dir/torch.jsonl" --markdown-into docs/performance.md \
      --gpu "$(cat "$dir/gpu.txt")" "${peers[@]}"
    ;;
  *)
    sed -n '2,/^set -e/{/^#/p}' "$0"
    exit 2
    ;;
esac
