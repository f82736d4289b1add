# HS_CHECK_PARALLEL_HDF5: HDF5 built with the MPI-IO driver (H5Pset_fapl_mpio).
# Looks in pkg-config (hdf5-openmpi, hdf5-mpich, hdf5), then in the compiler's default paths
# (h5pcc / a module that sets CPATH and LIBRARY_PATH), or under --with-hdf5=DIR.
AC_DEFUN([HS_CHECK_PARALLEL_HDF5], [
  AC_ARG_WITH([hdf5],
    [AS_HELP_STRING([--with-hdf5=DIR], [prefix of a parallel HDF5 installation])],
    [HDF5_CFLAGS="-I$withval/include"; HDF5_LIBS="-L$withval/lib -Wl,-rpath,$withval/lib -lhdf5"], [])
  AS_IF([test -z "$HDF5_LIBS"], [
    PKG_CHECK_MODULES([HDF5], [hdf5-openmpi], [],
      [PKG_CHECK_MODULES([HDF5], [hdf5-mpich], [],
        [PKG_CHECK_MODULES([HDF5], [hdf5], [], [HDF5_LIBS=-lhdf5])])])])
  hs_save_CFLAGS=$CFLAGS; hs_save_LIBS=$LIBS
  CFLAGS="$CFLAGS $HDF5_CFLAGS"; LIBS="$HDF5_LIBS $LIBS"
  AC_MSG_CHECKING([for parallel HDF5 (H5Pset_fapl_mpio)])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>
#ifndef H5_HAVE_PARALLEL
#error serial HDF5
#endif]], [[hid_t p = H5Pcreate(H5P_FILE_ACCESS); H5Pset_fapl_mpio(p, MPI_COMM_WORLD, MPI_INFO_NULL);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([parallel HDF5 not found (HDF5 must be built with --enable-parallel). On Debian: apt-get install libhdf5-openmpi-dev; on a cluster: module load hdf5/parallel, or pass --with-hdf5=DIR.])])
  AC_COMPUTE_INT([hs_h5_maj], [H5_VERS_MAJOR], [#include <hdf5.h>])
  AC_COMPUTE_INT([hs_h5_min], [H5_VERS_MINOR], [#include <hdf5.h>])
  AC_COMPUTE_INT([hs_h5_rel], [H5_VERS_RELEASE], [#include <hdf5.h>])
  HDF5_VERSION_STR="$hs_h5_maj.$hs_h5_min.$hs_h5_rel (parallel)"
  CFLAGS=$hs_save_CFLAGS; LIBS=$hs_save_LIBS
  AC_SUBST([HDF5_CFLAGS]) AC_SUBST([HDF5_LIBS])
])
