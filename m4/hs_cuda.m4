# HS_CHECK_CUDA: --with-cuda[=DIR], --with-cudnn[=DIR], --with-nccl[=DIR].
# The CUDA backend is optional; the CPU backend is always built, so one binary serves every node.
AC_DEFUN([HS_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend (toolkit under DIR, default /usr/local/cuda)])],
    [], [with_cuda=no])
  AC_ARG_WITH([cudnn],
    [AS_HELP_STRING([--with-cudnn@<:@=DIR@:>@], [use cuDNN for convolutions (needs --with-cuda)])],
    [], [with_cudnn=no])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [use NCCL for gradient all-reduce on GPUs (needs --with-cuda)])],
    [], [with_nccl=no])
  hs_cuda_summary="no (CPU backend only; enable with --with-cuda)"
  AS_IF([test "x$with_cuda" != xno], [
    AS_IF([test "x$with_cuda" = xyes], [CUDA_HOME=/usr/local/cuda], [CUDA_HOME=$with_cuda])
    AC_PATH_PROG([NVCC], [nvcc], [no], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
    AS_IF([test "x$NVCC" = xno], [AC_MSG_ERROR([--with-cuda: nvcc not found under $CUDA_HOME/bin. Pass --with-cuda=DIR or module load cuda.])])
    AS_IF([test ! -f "$CUDA_HOME/include/cuda_runtime.h"], [AC_MSG_ERROR([--with-cuda: $CUDA_HOME/include/cuda_runtime.h not found.])])
    CUDA_CFLAGS="-I$CUDA_HOME/include"
    CUDA_LIBS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64 -lcublasLt -lcublas -lcudart"
    hs_cuda_summary="yes ($CUDA_HOME)"
    AS_IF([test "x$with_cudnn" != xno], [
      AS_IF([test "x$with_cudnn" != xyes], [CUDA_CFLAGS="$CUDA_CFLAGS -I$with_cudnn/include"; CUDA_LIBS="$CUDA_LIBS -L$with_cudnn/lib"])
      CUDA_LIBS="$CUDA_LIBS -lcudnn"; hs_cuda_summary="$hs_cuda_summary, cuDNN"
      AC_DEFINE([HS_HAVE_CUDNN], [1], [cuDNN available])])
    AS_IF([test "x$with_nccl" != xno], [
      AS_IF([test "x$with_nccl" != xyes], [CUDA_CFLAGS="$CUDA_CFLAGS -I$with_nccl/include"; CUDA_LIBS="$CUDA_LIBS -L$with_nccl/lib"])
      CUDA_LIBS="$CUDA_LIBS -lnccl"; hs_cuda_summary="$hs_cuda_summary, NCCL"
      AC_DEFINE([HS_HAVE_NCCL], [1], [NCCL available])])
    AC_DEFINE([HS_HAVE_CUDA], [1], [CUDA backend built])
  ], [
    AS_IF([test "x$with_cudnn" != xno -o "x$with_nccl" != xno],
      [AC_MSG_ERROR([--with-cudnn and --with-nccl need --with-cuda])])
  ])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$with_cuda" != xno])
  AC_SUBST([CUDA_CFLAGS]) AC_SUBST([CUDA_LIBS]) AC_SUBST([NVCC])
])
