# HS_CHECK_CBLAS: a CBLAS with cblas_sgemm; prefers OpenBLAS (OpenMP build shares hetseq's thread pool).
AC_DEFUN([HS_CHECK_CBLAS], [
  AC_ARG_WITH([blas],
    [AS_HELP_STRING([--with-blas=LIBS], [link flags of a CBLAS library (default: OpenBLAS)])],
    [CBLAS_LIBS="$withval"], [])
  AS_IF([test -z "$CBLAS_LIBS"],
    [PKG_CHECK_MODULES([CBLAS], [openblas], [], [CBLAS_LIBS=-lopenblas])])
  hs_save_LIBS=$LIBS; hs_save_CFLAGS=$CFLAGS
  LIBS="$CBLAS_LIBS $LIBS"; CFLAGS="$CFLAGS $CBLAS_CFLAGS"
  AC_CHECK_HEADERS([cblas.h], [], [AC_MSG_ERROR([cblas.h not found. On Debian: apt-get install libopenblas-openmp-dev.])])
  AC_MSG_CHECKING([for cblas_sgemm in $CBLAS_LIBS])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cblas.h>]],
    [[cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.f, 0, 1, 0, 1, 0.f, 0, 1);]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([no CBLAS found. On Debian: apt-get install libopenblas-openmp-dev; or pass --with-blas="-L/path -lopenblas".])])
  AC_CHECK_FUNCS([openblas_set_num_threads])
  LIBS=$hs_save_LIBS; CFLAGS=$hs_save_CFLAGS
  AC_SUBST([CBLAS_CFLAGS]) AC_SUBST([CBLAS_LIBS])
])
