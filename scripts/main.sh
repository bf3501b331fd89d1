#!/usr/bin/env bash
# Builds Foundry and runs its main job on the default Vulkan device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release -DFOUNDRY_BUILD_TESTS=OFF
cmake --build --preset release --target foundry
build/release/foundry/cli/foundry devices
