# HS_CHECK_DNNL: oneDNN (dnnl.h, -ldnnl), optional. It gives the CPU backend its bf16 matrix products
# (precision = "bf16"); without it the CPU trains in fp32 only and refuses bf16 with a message naming
# the package. --without-dnnl builds without it even when it is installed.
AC_DEFUN([HS_CHECK_DNNL], [
  AC_ARG_WITH([dnnl],
    [AS_HELP_STRING([--with-dnnl@<:@=LIBS@:>@], [oneDNN for bf16 on the CPU (default: when found; Debian: libdnnl-dev)])],
    [], [with_dnnl=check])
  hs_have_dnnl=no
  AS_IF([test "x$with_dnnl" != xno], [
    AS_CASE([$with_dnnl], [yes|check], [DNNL_LIBS=-ldnnl], [DNNL_LIBS=$with_dnnl])
    hs_save_LIBS=$LIBS; LIBS="$DNNL_LIBS $LIBS"
    AC_MSG_CHECKING([for oneDNN's bf16 matmul (dnnl.h, $DNNL_LIBS)])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <dnnl.h>]],
        [[dnnl_engine_t e; (void)dnnl_engine_create(&e, dnnl_cpu, 0); (void)dnnl_get_effective_cpu_isa();
          dnnl_memory_desc_t md; dnnl_dims_t d = {1, 1}; (void)dnnl_memory_desc_init_by_tag(&md, 2, d, dnnl_bf16, dnnl_ab);]])],
      [hs_have_dnnl=yes], [hs_have_dnnl=no])
    AC_MSG_RESULT([$hs_have_dnnl])
    LIBS=$hs_save_LIBS])
  AS_IF([test "x$hs_have_dnnl" = xyes],
    [AC_DEFINE([HAVE_DNNL], [1], [oneDNN is linked: the CPU backend can run precision = "bf16"])],
    [DNNL_LIBS=
     AS_IF([test "x$with_dnnl" != xno && test "x$with_dnnl" != xcheck],
       [AC_MSG_ERROR([--with-dnnl given but oneDNN was not found. On Debian: apt-get install libdnnl-dev.])])
     AS_IF([test "x$with_dnnl" = xcheck],
       [AC_MSG_WARN([oneDNN not found: precision = "bf16" on the CPU will be refused (apt-get install libdnnl-dev)])])])
  AM_CONDITIONAL([HS_HAVE_DNNL], [test "x$hs_have_dnnl" = xyes])
  AC_SUBST([DNNL_LIBS])
])
