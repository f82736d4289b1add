# HS_CHECK_CUDA: --with-cuda[=DIR], --with-cudnn[=DIR], --with-nccl[=DIR].
# The CUDA backend is optional; the CPU backend is always built, so one binary serves every node.
AC_DEFUN([HS_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA backend (toolkit under DIR, default /usr/local/cuda)])],
    [], [with_cuda=no])
  AC_ARG_WITH([cudnn],
    [AS_HELP_STRING([--with-cudnn@<:@=DIR@:>@], [cuDNN for the CUDA backend's convolutions (default: with the toolkit)])],
    [], [with_cudnn=yes])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [NCCL for the CUDA backend's collectives (default: with the toolkit)])],
    [], [with_nccl=yes])
  hs_cuda_summary="no (CPU backend only; enable with --with-cuda)"
  AS_IF([test "x$with_cuda" != xno], [
    AS_IF([test "x$with_cuda" = xyes], [CUDA_HOME=/usr/local/cuda], [CUDA_HOME=$with_cuda])
    AC_PATH_PROG([NVCC], [nvcc], [no], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
    AS_IF([test "x$NVCC" = xno], [AC_MSG_ERROR([--with-cuda: nvcc not found under $CUDA_HOME/bin. Pass --with-cuda=DIR or module load cuda.])])
    AS_IF([test ! -f "$CUDA_HOME/include/cuda_runtime.h"], [AC_MSG_ERROR([--with-cuda: $CUDA_HOME/include/cuda_runtime.h not found.])])
    CUDA_CFLAGS="-I$CUDA_HOME/include"
    CUDA_LIBS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64"
    hs_cuda_summary="yes ($CUDA_HOME"
    # cuDNN (convolutions) and NCCL (collectives) are part of the backend: both are required, found
    # beside the toolkit unless --with-cudnn=DIR / --with-nccl=DIR say where.
    AS_IF([test "x$with_cudnn" = xno], [AC_MSG_ERROR([the CUDA backend needs cuDNN: drop --without-cudnn or pass --with-cudnn=DIR])])
    AS_IF([test "x$with_nccl" = xno], [AC_MSG_ERROR([the CUDA backend needs NCCL: drop --without-nccl or pass --with-nccl=DIR])])
    AS_IF([test "x$with_cudnn" != xyes], [CUDA_CFLAGS="$CUDA_CFLAGS -I$with_cudnn/include"; CUDA_LIBS="$CUDA_LIBS -L$with_cudnn/lib -L$with_cudnn/lib64 -Wl,-rpath,$with_cudnn/lib"])
    AS_IF([test "x$with_nccl" != xyes], [CUDA_CFLAGS="$CUDA_CFLAGS -I$with_nccl/include"; CUDA_LIBS="$CUDA_LIBS -L$with_nccl/lib -L$with_nccl/lib64 -Wl,-rpath,$with_nccl/lib"])
    hs_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"
    AC_CHECK_HEADER([cudnn.h], [], [AC_MSG_ERROR([--with-cuda: cudnn.h not found; install cuDNN or pass --with-cudnn=DIR])])
    AC_CHECK_HEADER([nccl.h], [], [AC_MSG_ERROR([--with-cuda: nccl.h not found; install NCCL or pass --with-nccl=DIR])])
    AC_CHECK_HEADER([cublasLt.h], [], [AC_MSG_ERROR([--with-cuda: cublasLt.h not found under $CUDA_HOME/include])])
    CPPFLAGS=$hs_save_CPPFLAGS
    CUDA_LIBS="$CUDA_LIBS -lnccl -lcudnn -lcublasLt -lcudart -lstdc++"
    # CUDA_LIBS link only the backend's module, hetseq_cuda.so; hetseq opens it with dlopen (DL_LIBS)
    hs_save_LIBS=$LIBS; LIBS=
    AC_SEARCH_LIBS([dlopen], [dl], [], [AC_MSG_ERROR([--with-cuda: dlopen not found (the CUDA backend is a module hetseq opens)])])
    DL_LIBS=$LIBS; LIBS=$hs_save_LIBS
    hs_cuda_summary="$hs_cuda_summary, cuBLASLt, cuDNN, NCCL)"
    # Turing to Hopper as machine code, and PTX of the newest for GPUs after it
    NVCC_GENCODE="-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=[[sm_90,compute_90]]"
  ], [
    AS_IF([test "x$with_cudnn" != xno -a "x$with_cudnn" != xyes -o "x$with_nccl" != xno -a "x$with_nccl" != xyes],
      [AC_MSG_ERROR([--with-cudnn=DIR and --with-nccl=DIR need --with-cuda])])
  ])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$with_cuda" != xno])
  AC_SUBST([CUDA_CFLAGS]) AC_SUBST([CUDA_LIBS]) AC_SUBST([DL_LIBS]) AC_SUBST([NVCC]) AC_SUBST([NVCC_GENCODE])
])
