# docs/gpu.md "Adding an op" works when followed to the letter: in a scratch copy of the source, every
# fenced block of that section is applied as the line above it says ("New file `PATH`:", or "In
# `PATH`, after|before the line `LINE`, insert:", or "in the same file, after|before ..."; LINE matches
# exactly one line of the file, blanks around it ignored). Then:
# - the recipe changed at most 6 files (git diff --stat of the scratch copy: math header, CPU file, CUDA
#   file, ops.def, a conformance case, a unit check) and no Makefile or list;
# - the scratch copy configures (CPU + emulated device, never nvcc) and builds the unit test and the
#   op-conformance test (make -j2, those targets only);
# - the worked example's unit check passes and its conformance case runs and passes (CUDA on the
#   emulated device against the CPU);
# - a backend table without the example's first op stops at hs_backend_check with its named error
#   (exit status 2, the op's name), not a crash.
# A doc block that no longer applies, a file the recipe forgot, or a Makefile list it needs fails here.
# Costs one more build of the project (libhetseq.a, the emulated backend, two test programs; without -g).
. "$top_srcdir/tests/lib.sh"
SRC=$(cd "$top_srcdir" && pwd)
BUILD=$(cd "$top_builddir" && pwd)
[ -n "${HETSEQ_EMU:-}" ] || skip "configure found no emulated CUDA device (Boost.Context): the recipe's conformance case needs it"
need_cmd git git
need_cmd python3 python3
need_cmd autoreconf autoconf

# ---- the scratch copy: the tracked files of the source as they are on disk --------------------------
mkdir src
if git -C "$SRC" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  git -C "$SRC" ls-files -z | tar -C "$SRC" --null -T - --ignore-failed-read -cf - | tar -C src -xf - ||
    fail "copying the tracked files of $SRC"
else # a release tarball: its files, without build directories
  tar -C "$SRC" --exclude='./build*' --exclude=./autom4te.cache -cf - . | tar -C src -xf - || fail "copying $SRC"
fi
cd src || exit 99
git init -q . && git add -A && git -c user.name=recipe -c user.email=recipe@localhost commit -qm base ||
  fail "git commit of the scratch copy"

# ---- apply the doc's blocks -------------------------------------------------------------------------
python3 - docs/gpu.md << 'EOF' || fail "docs/gpu.md \"Adding an op\" could not be applied as written (above)"
import re, sys
doc = open(sys.argv[1], encoding="utf-8").read().split("\n")
try:
    start = doc.index("### Adding an op")
except ValueError:
    sys.exit("no section \"### Adding an op\" in docs/gpu.md")
end = next((i for i in range(start + 1, len(doc)) if re.match(r"#{1,3} ", doc[i])), len(doc))
lines = doc[start + 1:end]
new_re = re.compile(r"New file `([^`]+)`:$")
ins_re = re.compile(r"(?:In `([^`]+)`|in the same file), (after|before) the line `(.+?)`(?: \([^)]*\))?, insert:$")
edits, path, i = 0, None, 0
while i < len(lines):
    if not lines[i].startswith("```"):
        i += 1
        continue
    j = i + 1
    while j < len(lines) and lines[j] != "```":
        j += 1
    if j == len(lines):
        sys.exit("an unclosed ``` block in \"Adding an op\"")
    body = lines[i + 1:j]
    k = i - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    said = lines[k].strip() if k >= 0 else ""
    m_new, m_ins = new_re.search(said), ins_re.search(said)
    if m_new:
        path = m_new.group(1)
        try:
            with open(path, "x", encoding="utf-8") as f:
                f.write("\n".join(body) + "\n")
        except FileExistsError:
            sys.exit(f"\"New file `{path}`\": it exists already")
        print(f"new file {path}: {len(body)} lines")
    elif m_ins:
        if m_ins.group(1):
            path = m_ins.group(1)
        if path is None:
            sys.exit(f"\"in the same file\" before any file was named: {said}")
        where, anchor = m_ins.group(2), m_ins.group(3).strip()
        try:
            text = open(path, encoding="utf-8").read().split("\n")
        except OSError as e:
            sys.exit(f"{said}: {e}")
        hits = [n for n, l in enumerate(text) if l.strip() == anchor]
        if len(hits) != 1:
            sys.exit(f"{path}: the line `{anchor}` occurs {len(hits)} times (the recipe needs it once)")
        at = hits[0] + (1 if where == "after" else 0)
        text[at:at] = body
        open(path, "w", encoding="utf-8").write("\n".join(text))
        print(f"{path}: {len(body)} lines {where} line {hits[0] + 1}")
    else:
        sys.exit(f"a block in \"Adding an op\" without a line saying where it goes; the line above it: {said!r}")
    edits += 1
    i = j + 1
if edits == 0:
    sys.exit("\"Adding an op\" has no blocks to apply")
EOF

git add -A
git diff --cached --stat
changed=$(git diff --cached --name-only | wc -l)
[ "$changed" -ge 1 ] || fail "the recipe changed nothing"
[ "$changed" -le 6 ] || fail "the recipe touched $changed files, more than 6: $(git diff --cached --name-only | tr '\n' ' ')"
if git diff --cached --name-only | grep -E '(^|/)(Makefile\.am|configure\.ac)$|\.am$'; then
  fail "the recipe edits a Makefile or a list (above): a new op family must need none"
fi
echo "the recipe touched $changed files"

# ---- configure (the configure arguments of this build, without --with-cuda) and build --------------
autoreconf -fi > ../autoreconf.log 2>&1 || { cat ../autoreconf.log; fail "autoreconf in the scratch copy"; }
args=()
if [ -x "$BUILD/config.status" ]; then
  eval "set -- $("$BUILD/config.status" --config)"
  for a in "$@"; do
    case $a in --with-cuda* | --with-cudnn* | --with-nccl* | --without-cuda) ;; *) args+=("$a") ;; esac
  done
fi
# ... with the build's CFLAGS and CXXFLAGS less their -g: debug information changes neither the code
# GCC generates nor its warnings (-Werror), and writing it costs 13% (C) to 25% (the emulated kernels'
# C++) of each compile here.
nodebug() { # flags...: the flags less -g, -g<level>, -ggdb..., -gdwarf...
  local f out=()
  for f in "$@"; do case $f in -g | -g[0-9] | -ggdb* | -gdwarf*) ;; *) out+=("$f") ;; esac; done
  echo "${out[*]}"
}
flags() { sed -n "s/^$1 = //p" "$BUILD/Makefile" 2> /dev/null; }
if [ -r "$BUILD/Makefile" ]; then
  # shellcheck disable=SC2046 # word splitting of the flags is meant
  args+=("CFLAGS=$(nodebug $(flags CFLAGS))" "CXXFLAGS=$(nodebug $(flags CXXFLAGS))")
fi
mkdir build && cd build || exit 99
../configure -q "${args[@]}" > ../../configure.log 2>&1 || { tail -30 ../../configure.log; fail "configure of the scratch copy"; }
make -j2 tests/unit/test_cpu_ops tests/cuda/test_op_conformance > ../../make.log 2>&1 ||
  { grep -E 'error|Error' ../../make.log | head -30; tail -20 ../../make.log; fail "building the scratch copy with the new op"; }

# ---- the example's unit check and conformance case -------------------------------------------------
./tests/unit/test_cpu_ops > ../../unit.log 2>&1 || { cat ../../unit.log; fail "tests/unit/test_cpu_ops with the recipe's check"; }
grep -q 'OK \] test_square$' ../../unit.log || { cat ../../unit.log; fail "the recipe's unit check test_square did not run"; }
grep -E 'test_square' ../../unit.log
./tests/cuda/test_op_conformance elementwise_attention fp32 > ../../conf.log 2>&1 ||
  { cat ../../conf.log; fail "op conformance with the recipe's case"; }
grep -E '^ *square_forward/backward ' ../../conf.log || { cat ../../conf.log; fail "the recipe's conformance case did not run"; }
tail -1 ../../conf.log

# ---- a table without square_forward: hs_backend_check's named error --------------------------------
cat > ../../missing_op.c << 'EOF'
#include "backend/backend.h"
int main(void) {
    hs_backend t = *hs_backend_cpu();
    t.square_forward = NULL; /* the entry left out */
    hs_backend_check(&t);
    return 0; /* not reached when the check works */
}
EOF
make -s --eval='missing_op: ../../missing_op.c libhetseq.a libhetseq_nocuda.a ; $(CC) $(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(CPPFLAGS) $(AM_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(HS_LIBS)' missing_op > ../../missing.log 2>&1 ||
  { cat ../../missing.log; fail "building the missing-entry program"; }
./missing_op > ../../missing.log 2>&1
status=$?
cat ../../missing.log
[ "$status" -eq 2 ] || fail "a table without square_forward: exit status $status, expected hs_backend_check's 2"
grep -q 'no entry for op "square_forward"' ../../missing.log || fail "a table without square_forward: the error does not name the op"
pass "docs/gpu.md \"Adding an op\" applied as written: $changed files, builds, passes, a missing entry is named"
