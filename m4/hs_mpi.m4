# HS_PROG_MPICC: use the MPI compiler wrapper unless CC is given.
AC_DEFUN([HS_PROG_MPICC], [
  AS_IF([test -z "$CC"], [AC_CHECK_PROGS([CC], [mpicc h5pcc], [])])
  AS_IF([test -z "$CC"],
    [AC_MSG_ERROR([no MPI C compiler (mpicc) found. On Debian: apt-get install libopenmpi-dev openmpi-bin; on a cluster: module load openmpi.])])
])

# HS_CHECK_MPI: MPI-3 with MPI_THREAD_MULTIPLE support in the headers (the prefetch thread needs it).
AC_DEFUN([HS_CHECK_MPI], [
  AC_MSG_CHECKING([for MPI-3 (mpi.h, MPI_Comm_split_type)])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
    [[MPI_Comm c; int p; MPI_Init_thread(0, 0, MPI_THREAD_MULTIPLE, &p);
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([an MPI-3 C library is required (CC=$CC cannot link MPI_Comm_split_type). Use CC=mpicc; on Debian: apt-get install libopenmpi-dev.])])
  AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [mpirun])
])

# HS_CHECK_PTHREAD
AC_DEFUN([HS_CHECK_PTHREAD], [
  hs_save_CFLAGS=$CFLAGS; CFLAGS="$CFLAGS -pthread"
  AC_MSG_CHECKING([for POSIX threads with -pthread])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <pthread.h>]], [[pthread_t t; pthread_create(&t, 0, 0, 0);]])],
    [AC_MSG_RESULT([yes]); PTHREAD_CFLAGS=-pthread; PTHREAD_LIBS=-pthread],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([POSIX threads are required for the prefetch thread.])])
  CFLAGS=$hs_save_CFLAGS
  AC_SUBST([PTHREAD_CFLAGS]) AC_SUBST([PTHREAD_LIBS])
])
