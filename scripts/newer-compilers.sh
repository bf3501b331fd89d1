#!/usr/bin/env bash
# Newer shader compilers than Debian 12's (glslc 2026.x with glslang 16.x, spirv-val 2026.x, from Debian 14
# "forky"), which compile GL_NV_cooperative_matrix2, GL_KHR_cooperative_matrix and GL_EXT_bfloat16
# (bf16 cooperative-matrix operands: glslang 15.3 or newer; Debian 13's 15.1 compiles the first two only),
# in a private prefix: the packages come from Debian's archive through a private apt configuration, are
# unpacked with dpkg-deb (never installed), and run through the prefix's own loader with its libc and
# libstdc++, so nothing of the system changes. Prints the glslc to give Foundry as FOUNDRY_GLSLC.
#
#   bash scripts/newer-compilers.sh [PREFIX]   # default PREFIX: .cache/compilers under the project
#   FOUNDRY_GLSLC=$(bash scripts/newer-compilers.sh) foundry devices
#   FOUNDRY_COMPILERS_SUITE=trixie bash scripts/newer-compilers.sh /tmp/trixie   # Debian 13's instead
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(realpath -m "${1:-.cache/compilers}")
suite=${FOUNDRY_COMPILERS_SUITE:-forky}
if [ -x "$prefix/bin/glslc" ] && [ "$(cat "$prefix/suite" 2>/dev/null)" = "$suite" ] &&
   "$prefix/bin/glslc" --version >/dev/null 2>&1; then
  echo "$prefix/bin/glslc"
  exit 0
fi
work=$(mktemp -d /tmp/foundry-compilers.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" \
  >"$work/sources.list"
apt_opts=(-o Dir::Etc::sourcelist="$work/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$work/lists"
          -o Dir::Cache="$work/cache" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update -qq >&2
(cd "$work/debs" && apt-get "${apt_opts[@]}" download glslc libshaderc1 spirv-tools libc6 libstdc++6 libgcc-s1 >&2)
for deb in "$work"/debs/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
# Only what glslc and spirv-val load: the rest of libc6 and spirv-tools stays out of the prefix.
rm -rf "$prefix"
mkdir -p "$prefix/lib" "$prefix/libexec"
lib=$work/root/usr/lib/x86_64-linux-gnu
for f in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libgcc_s.so.1 libshaderc.so.1; do cp "$lib/$f" "$prefix/lib/"; done
cp -L "$lib/libstdc++.so.6" "$prefix/lib/"
cp "$work/root/usr/bin/glslc" "$work/root/usr/bin/spirv-val" "$prefix/libexec/"
mkdir -p "$prefix/bin"
for tool in glslc spirv-val; do
  cat >"$prefix/bin/$tool" <<EOF
#!/bin/sh
# Debian's $suite $tool, run through the loader and libraries beside it (scripts/newer-compilers.sh).
here=\$(dirname "\$(readlink -f "\$0")")/..
exec "\$here/lib/ld-linux-x86-64.so.2" --library-path "\$here/lib" "\$here/libexec/$tool" "\$@"
EOF
  chmod +x "$prefix/bin/$tool"
done
echo "$suite" >"$prefix/suite"
# Not `| head -1`: under pipefail, glslc writing its later lines into a closed pipe fails the script.
version=$("$prefix/bin/glslc" --version)
echo "${version%%$'\n'*}" >&2
echo "$prefix/bin/glslc"
