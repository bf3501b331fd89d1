#!/usr/bin/env bash
# Builds Foundry and runs its main job on the default Vulkan device: Llama-3.1-8B's attention (the
# config's default run: batch 1, a 64-token prompt, 8 decode tokens, 2 layers), checked against the
# CPU and the materialised path. Full size: add --layers 32 --prompt-len 8192 --decode-tokens 128.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release -DFOUNDRY_BUILD_TESTS=OFF
cmake --build --preset release --target foundry
build/release/apps/foundry/foundry run configs/llama-3.1-8b.json --check "$@"
