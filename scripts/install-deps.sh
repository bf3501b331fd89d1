#!/usr/bin/env bash
# Installs what Foundry needs from Debian 12's packages: the toolchain, the libraries it builds
# against (valijson validates configs against configs/schema.json), the CPU Vulkan driver (lavapipe),
# the Khronos validation layer, clang with libFuzzer and its sanitizer runtimes for scripts/fuzz.sh,
# python3 for the bench scripts' table printers, and Open MPI for the ranks of distributed runs.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libvulkan-dev libshaderc-dev glslang-dev spirv-tools
  nlohmann-json3-dev libvalijson-dev libfmt-dev libspdlog-dev libcli11-dev libgtest-dev libgmock-dev
  mesa-vulkan-drivers vulkan-validationlayers
  clang-14 libclang-rt-14-dev
  python3
  libopenmpi-dev openmpi-bin
)
missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
