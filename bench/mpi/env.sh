# Sourced (bash) on the GPU machine, from the project root, after .device/env.sh: Open MPI from the
# Debian packages `bench/mpi/pack.sh` put in .device/mpi/, unpacked under /tmp/mpiroot (never into /)
# and relocated there: OPAL_PREFIX for Open MPI's own directories (its plugins, help texts), the
# system configuration directory, PMIx's prefix, and the libraries ahead of anything the machine has.
# mpirun launches on this host only (no ssh: the machine has none), over shared memory.
mpiroot=${MPI_PACK_ROOT:-/tmp/mpiroot}
if [ ! -x "$mpiroot/usr/bin/orterun" ]; then
  mkdir -p "$mpiroot"
  for f in .device/mpi/*.deb; do dpkg-deb -x "$f" "$mpiroot"; done
  # Debian's `mpirun` is an alternatives link, which the packages do not carry; orterun is the program.
  ln -sf orterun "$mpiroot/usr/bin/mpirun"
fi
mpilib=$mpiroot/usr/lib/x86_64-linux-gnu
export OPAL_PREFIX=$mpiroot/usr
export OPAL_SYSCONFDIR=$mpiroot/etc/openmpi
# Debian's PMIx names its directories absolutely, so each is relocated by name.
export PMIX_INSTALL_PREFIX=$mpilib/pmix2 PMIX_PREFIX=$mpilib/pmix2 PMIX_LIBDIR=$mpilib/pmix2/lib
export PMIX_PKGLIBDIR=$mpilib/pmix2/lib/pmix PMIX_DATADIR=$mpilib/pmix2/share PMIX_PKGDATADIR=$mpilib/pmix2/share/pmix
export PMIX_SYSCONFDIR=$mpiroot/etc
export LD_LIBRARY_PATH=$mpilib/openmpi/lib:$mpilib/pmix2/lib:$mpilib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$mpiroot/usr/bin:$PATH
# Root on the device machine; one host, so neither ssh nor a network transport is needed.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm=isolated OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
