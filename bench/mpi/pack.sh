#!/usr/bin/env bash
# Open MPI's runtime for the GPU machine, which has no network and no MPI: Debian 12's packages
# (mpirun/orterun, libmpi and its plugins, PMIx, hwloc, libevent and the transports' libraries) into
# .device/mpi/ as .debs; bench/mpi/env.sh unpacks them there under /tmp/mpiroot and relocates Open MPI.
#
#   bash bench/mpi/pack.sh            # here, from the project root: fill .device/mpi/
#   bash bench/mpi/pack.sh check PROG # here: run `mpirun -np 2 PROG` from the packed copy only, in a
#                                     # mount namespace where every file the host's own copies of these
#                                     # packages installed is masked, with a clean environment
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
# The packages and what they need beyond what a bare Ubuntu/CUDA image has (glibc, libstdc++, zlib).
pkgs=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7
      libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1
      libnuma1 libmunge2 libudev1)
case "${1:-pack}" in
  pack)
    exclude=$(git rev-parse --git-common-dir)/info/exclude
    grep -qx '/.device/' "$exclude" 2>/dev/null || { mkdir -p "$(dirname "$exclude")"; echo '/.device/' >> "$exclude"; }
    mkdir -p .device/mpi
    if [ "$(ls .device/mpi/*.deb 2>/dev/null | wc -l)" -lt "${#pkgs[@]}" ]; then
      rm -f .device/mpi/*.deb
      (cd .device/mpi && apt-get download "${pkgs[@]}" >/dev/null 2>&1) ||
        { apt-get update -qq && (cd .device/mpi && apt-get download "${pkgs[@]}"); }
    fi
    du -sh .device/mpi | awk '{print "bench/mpi/pack.sh: .device/mpi holds " $1}'
    ;;
  check)
    prog=${2:?usage: bench/mpi/pack.sh check PROG [ARGS...]}
    shift 2
    root=$(mktemp -d /tmp/mpicheck.XXXXXX)
    # Every regular file and directory the host's installed copies of these packages hold, masked by
    # /dev/null or an empty directory: a run that still used one of them fails to load it.
    masks=$(dpkg -L "${pkgs[@]}" 2>/dev/null | grep -E '^/(usr/lib|usr/share/openmpi|etc/openmpi|usr/bin)' |
            while read -r f; do [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"; done | grep -v '/libudev\.so' || true)
    mkdir -p "$root/empty"
    printf '%s\n' $masks > "$root/masks"
    echo "bench/mpi/pack.sh: masking $(wc -l < "$root/masks") files of the host's Open MPI packages"
    unshare -m bash -c '
      set -e
      while read -r f; do mount --bind /dev/null "$f"; done < "$1/masks"
      for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi; do
        [ -d "$d" ] && mount --bind "$1/empty" "$d"
      done
      shift
      exec env -i HOME=/root PATH=/usr/bin:/bin MPI_PACK_ROOT="$1/root" bash -c "
        source bench/mpi/env.sh
        echo \"mpirun is \$(command -v mpirun)\"
        mpirun -np 2 --oversubscribe \"\$@\"" bash "${@:2}"
    ' bash "$root" "$root" "$prog" "$@"
    rm -rf "$root"
    ;;
  *) sed -n '2,/^set -e/{/^#/p}' "$0"; exit 2 ;;
esac
