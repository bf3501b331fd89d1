#!/usr/bin/env bash
# Builds Foundry and runs every test suite on the default Vulkan device (lavapipe without a GPU),
# under the Khronos validation layer. Usage: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
ctest --preset release
