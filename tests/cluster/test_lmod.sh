# The Lmod modulefile `make install` puts in --with-modulefiledir works with a real Lmod (Debian's
# lmod): installed into a temporary prefix, `module use DIR; module load hetseq` makes `hetseq` the
# installed one, `module show hetseq` lists what it sets (HETSEQ_ROOT, PATH, MANPATH) and the
# installed batch scripts and experiments are where the modulefile's help says. Fails without Lmod
# (Debian's lmod), naming it.
#
# The modulefile's prefix is substituted by configure (batch/hetseq.lua.in), so the test configures a
# fresh build tree with --prefix=<tmp> --with-modulefiledir=<tmp>/share/modulefiles (the options of
# this build kept) and runs `make install-data` there (no compiling: data only), and installs the
# already built program with this build's `make install-exec prefix=<tmp>`.
. "$top_srcdir/tests/lib.sh"
SRC=$(cd "$top_srcdir" && pwd)
BUILD=$(cd "$top_builddir" && pwd)

LMOD_INIT=
for f in /usr/share/lmod/lmod/init/bash /usr/share/lmod/*/init/bash /usr/lmod/lmod/init/bash \
         /opt/apps/lmod/lmod/init/bash; do
  [ -f "$f" ] && { LMOD_INIT=$f; break; }
done
[ -n "$LMOD_INIT" ] || fail "no Lmod: install Debian's lmod (apt-get install lmod; tools/quickstart.sh test installs it)"
[ -x "$BUILD/config.status" ] || fail "no config.status in $BUILD"

P="$WORK/prefix"
MF="$P/share/modulefiles"
mkdir -p build
# The options this build was configured with, minus its prefix and modulefile directory.
eval "set -- $("$BUILD/config.status" --config)"
opts=()
for a in "$@"; do
  case "$a" in --prefix=* | --with-modulefiledir=* | -q | --quiet | --silent) ;; *) opts+=("$a") ;; esac
done
(cd build && timeout 300 "$SRC/configure" -q "${opts[@]}" --prefix="$P" --with-modulefiledir="$MF") > configure.log 2>&1 \
  || { tail -n 30 configure.log; fail "configure --prefix=$P --with-modulefiledir=$MF failed"; }
timeout 120 make -C build install-data > install-data.log 2>&1 || { cat install-data.log; fail "make install-data failed"; }
# -o hetseq: install the program make check tests, never rebuild it here
timeout 120 make -C "$BUILD" -o "hetseq" install-exec prefix="$P" > install-exec.log 2>&1 \
  || { cat install-exec.log; fail "make install-exec prefix=$P failed"; }
# the version line is stdout's (stderr may carry a note, e.g. the OpenBLAS kernel switch's, with timings)
version=$("$BUILD/hetseq" --version 2> version.err | head -n 1)
[ -n "$version" ] || { cat version.err; fail "the built hetseq --version printed no version on stdout"; }
ver=$(sed -n 's/^PACKAGE_VERSION=.//p' build/config.log | tr -d "'" | head -n 1)
[ -n "$ver" ] || ver=$(sed -n "s/^S\[\"PACKAGE_VERSION\"\]=\"\(.*\)\"$/\1/p" build/config.status | head -n 1)
[ -f "$MF/hetseq/$ver.lua" ] || { find "$P"; fail "no modulefile $MF/hetseq/$ver.lua"; }
[ -x "$P/bin/hetseq" ] || fail "no $P/bin/hetseq"
for f in mnist.slurm mnist.pbs bert_phase1.slurm bert_phase2.slurm bert_pretrain.sh bert_phase1.pbs bert_phase2.pbs hetero.slurm; do
  [ -f "$P/share/hetseq/batch/$f" ] || fail "make install did not install batch/$f"
done
[ -f "$P/share/hetseq/conf/mnist.cfg" ] || fail "make install did not install conf/mnist.cfg"
# --with-cuda: the CUDA backend's module in $(pkglibdir), where the installed hetseq looks for it
if [ -n "${HS_CUDA_MODULE_BUILT:-}" ]; then
  [ -f "$P/lib/hetseq/$HS_CUDA_MODULE_BUILT" ] || { find "$P"; fail "make install-exec did not install $P/lib/hetseq/$HS_CUDA_MODULE_BUILT"; }
fi
echo "ok: installed into $P (modulefile $MF/hetseq/$ver.lua)"

# ---- Lmod, in a clean state of its own ------------------------------------------------------------
export HOME="$WORK/home"        # Lmod's user cache and collections
mkdir -p "$HOME"
for v in $(compgen -e | grep -E '^(LMOD_|MODULE|_LMFILES_|LOADEDMODULES|_ModuleTable)'); do unset "$v"; done
unset HETSEQ_ROOT
export MODULEPATH=
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -x -F "$BUILD" | paste -sd:)
set +u                          # Lmod's scripts use unset variables
. "$LMOD_INIT" || fail "cannot source $LMOD_INIT"
type module > /dev/null 2>&1 || fail "$LMOD_INIT defines no module command"
module use "$MF" || fail "module use $MF failed"
avail=$(module -t avail hetseq 2>&1)
printf '%s\n' "$avail" | grep -q "^hetseq/$ver" || { printf '%s\n' "$avail"; fail "module avail does not list hetseq/$ver"; }
module load hetseq 2> load.err || { cat load.err; fail "module load hetseq failed"; }
grep -q -i error load.err && { cat load.err; fail "module load hetseq: $(cat load.err)"; }
set -u
[ "$(command -v hetseq)" = "$P/bin/hetseq" ] || fail "after module load, hetseq is $(command -v hetseq), not $P/bin/hetseq"
[ "${HETSEQ_ROOT:-}" = "$P" ] || fail "HETSEQ_ROOT is '${HETSEQ_ROOT:-}', expected $P"
case ":${MANPATH:-}:" in *":$P/share/man:"*) ;; *) fail "MANPATH lacks $P/share/man: ${MANPATH:-}" ;; esac
got=$(hetseq --version 2> got.err | head -n 1)
[ "$got" = "$version" ] || { cat got.err; fail "hetseq --version says '$got', the built one '$version'"; }
echo "ok: module load hetseq -> $(command -v hetseq); hetseq --version: $got"

set +u
show=$(module show hetseq 2>&1)
set -u
for want in "setenv(\"HETSEQ_ROOT\",\"$P\")" "prepend_path(\"PATH\",\"$P/bin\")" "prepend_path(\"MANPATH\",\"$P/share/man\")" \
            "whatis(\"Version: $ver\")"; do
  printf '%s\n' "$show" | tr -d ' ' | grep -q -F "$(printf '%s' "$want" | tr -d ' ')" \
    || { printf '%s\n' "$show"; fail "module show hetseq lacks $want"; }
done
echo "ok: module show hetseq: HETSEQ_ROOT, PATH, MANPATH, version $ver"

set +u
module unload hetseq
set -u
[ -z "${HETSEQ_ROOT:-}" ] || fail "module unload left HETSEQ_ROOT=$HETSEQ_ROOT"
[ "$(command -v hetseq)" != "$P/bin/hetseq" ] || fail "module unload left $P/bin on PATH"
echo "ok: module unload hetseq restores the environment"

# --with-cuda: an installed tree moved after make install (module trees often are) still finds its CUDA
# module, in ../lib/hetseq from its hetseq (the configured $(pkglibdir) is gone with the move)
if [ -n "${HS_CUDA_MODULE_BUILT:-}" ]; then
  mv "$P" "$WORK/moved"
  out=$(cd "$WORK" && env -u HETSEQ_CUDA_MODULE timeout 60 "$WORK/moved/bin/hetseq" train "$WORK/moved/share/hetseq/conf/mnist.cfg" \
        -o device=\"cuda\" -o data.path=\"$WORK/none.h5\" 2>&1)
  case "$out" in *"could not be loaded"*) printf '%s\n' "$out"; fail "the moved install's hetseq did not find its CUDA module in ../lib/hetseq" ;; esac
  printf '%s\n' "$out" | grep -q -e 'no usable GPU' -e 'uses GPU' \
    || { printf '%s\n' "$out"; fail "the moved install's hetseq with device = \"cuda\": neither its module's no-GPU error nor a GPU"; }
  mv "$WORK/moved" "$P"
  echo "ok: a moved install's hetseq loads its CUDA module from ../lib/hetseq"
fi
pass
