# The CUDA backend as a module (docs/gpu.md, "The CUDA module"): with configure --with-cuda, hetseq
# links no CUDA library; the backend, hetseq_cuda.so, is opened only by a rank whose device is "cuda"
# or "auto". Runs without a GPU (CI); skipped (77) in a build without --with-cuda.
#   (a) readelf: hetseq NEEDs none of cudart, cuBLAS(Lt), cuDNN, NCCL; the module NEEDs them.
#   (b) 2 CPU ranks train with HETSEQ_CUDA_MODULE naming a file that does not exist, and neither rank
#       maps the module or a CUDA library (LD_DEBUG=files): device = "cpu" never opens it.
#   (c) device = "cuda", the module from the build tree: no GPU here, so the backend in the loaded
#       module says so and both ranks end, non-zero (with a GPU visible: both ranks train on it, and
#       rank 0 logs the module file it opened).
#   (d) HETSEQ_CUDA_MODULE=/nonexistent/...: the load error names the path, dlerror's text and what to
#       do, non-zero on both ranks, no hang; a file that is not the module, and the module of another
#       build, are named as such; device = "auto" runs on the CPU and says why.
. "$top_srcdir/tests/lib.sh"
[ -n "${HS_CUDA_MODULE_BUILT:-}" ] || skip "this build has no CUDA backend module (configure --with-cuda builds it)"
MODULE="$top_builddir/$HS_CUDA_MODULE_BUILT"
[ -f "$MODULE" ] || fail "$MODULE is not built (make builds it with hetseq)"
need_cmd readelf binutils

# ---- (a) what the executable and the module link -------------------------------------------------
cuda_libs='libcudart|libcublas|libcublasLt|libcudnn|libnccl'
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
needed "$HETSEQ" > exe.needed || fail "readelf -d $HETSEQ failed"
[ -s exe.needed ] || fail "readelf found no NEEDED entry in $HETSEQ"
grep -E "^($cuda_libs)\." exe.needed && fail "hetseq links CUDA libraries (above); only $MODULE may"
needed "$MODULE" > module.needed || fail "readelf -d $MODULE failed"
for lib in libcudart libcublasLt libcudnn libnccl; do
  grep -q "^$lib\.so" module.needed || { cat module.needed; fail "$MODULE does not link $lib"; }
done
echo "ok: hetseq NEEDs $(tr '\n' ' ' < exe.needed)- no CUDA library; the module NEEDs $(grep -E "^($cuda_libs)\." module.needed | tr '\n' ' ')"

make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
tiny="-o data.path=\"mnist.h5\" -o training.max_update=2 -o training.max_epoch=0 -o training.max_sentences=8
  -o log.interval=1"

# ---- (b) device = "cpu" never opens the module ----------------------------------------------------
HETSEQ_CUDA_MODULE=/nonexistent/hetseq_cuda.so mpi 2 env LD_DEBUG=files "$HETSEQ" train "$CNN" $tiny \
  -o device=\"cpu\" -o checkpoint.save_dir=\"cpu\" > cpu.log 2>&1 || { tail -40 cpu.log; fail "2-rank CPU training failed"; }
grep -q '"type": "train"' cpu/metrics.jsonl || { tail -40 cpu.log; fail "the CPU job wrote no train record"; }
[ "$(grep -c 'file=.*\[0\];  needed by .*hetseq' cpu.log)" -gt 0 ] ||
  { tail -20 cpu.log; fail "LD_DEBUG=files printed no library loads (cannot tell what the ranks mapped)"; }
grep -E "file=[^ ]*(hetseq_cuda\.so|($cuda_libs)\.)" cpu.log && fail "a CPU rank opened the module or a CUDA library (above)"
echo "ok: 2 CPU ranks trained with HETSEQ_CUDA_MODULE=/nonexistent; no rank opened the module or a CUDA library"

# ---- (c) device = "cuda" with the build tree's module ---------------------------------------------
gpu=no
if command -v nvidia-smi > /dev/null 2>&1; then nvidia-smi -L 2> /dev/null | grep -q '^GPU' && gpu=yes
else ls /dev/nvidia[0-9]* > /dev/null 2>&1 && gpu=yes
fi
if [ $gpu = yes ]; then
  unset HETSEQ_CUDA_MODULE
  mpi 2 "$HETSEQ" train "$CNN" $tiny -o device=\"cuda\" -o checkpoint.save_dir=\"gpu\" > gpu.log 2>&1 ||
    { tail -40 gpu.log; fail "2-rank training on the GPU (the module from the build tree) failed"; }
  [ "$(grep -c 'device = cuda: rank [01] .* uses GPU' gpu.log)" -eq 2 ] || { cat gpu.log; fail "not both ranks took a GPU"; }
  grep -q "^| CUDA module: .*/hetseq_cuda.so (next to hetseq)\$" gpu.log ||
    { cat gpu.log; fail "rank 0 did not log the module file it opened (| CUDA module: PATH (next to hetseq))"; }
  echo "ok: a GPU is visible: 2 ranks trained on it through $MODULE"
else
  (unset HETSEQ_CUDA_MODULE
   expect_error "device = \"cuda\" without a GPU, the module loaded" \
     'device = "cuda" but no usable GPU on this node \(.+\)\. Run on a GPU node' \
     mpi 2 "$HETSEQ" train "$CNN" $tiny -o device=\"cuda\") || exit 1
fi

# ---- (d) the module cannot be loaded ---------------------------------------------------------------
(export HETSEQ_CUDA_MODULE=/nonexistent/hetseq_cuda.so
 expect_error "device = \"cuda\", HETSEQ_CUDA_MODULE=$HETSEQ_CUDA_MODULE" \
   'device = "cuda" but the CUDA backend module /nonexistent/hetseq_cuda.so \(HETSEQ_CUDA_MODULE\) could not be loaded \(.*cannot open shared object file.*\)\. .*module load cuda.*LD_LIBRARY_PATH.*HETSEQ_CUDA_MODULE=' \
   mpi 2 "$HETSEQ" train "$CNN" $tiny -o device=\"cuda\") || exit 1
# a mixed job: rank 0 on the CPU, rank 1 asks for CUDA where the module cannot be loaded: rank 1 says
# why and the whole job ends (rank 0 is not left waiting)
expect_error "rank 0 device = \"cpu\", rank 1 device = \"cuda\" without the module" \
  'device = "cuda" but the CUDA backend module /nonexistent/hetseq_cuda.so \(HETSEQ_CUDA_MODULE\) could not be loaded' \
  mpi 1 "$HETSEQ" train "$CNN" $tiny -o device=\"cpu\" : \
  -np 1 env HETSEQ_CUDA_MODULE=/nonexistent/hetseq_cuda.so "$HETSEQ" train "$CNN" $tiny -o device=\"cuda\"
# a shared object that is not the module (the C library: no hs_backend_cuda in it)
libc=$(ldd "$HETSEQ" | sed -n 's/.*libc\.so\.6 => \([^ ]*\).*/\1/p')
[ -f "$libc" ] || fail "ldd names no libc.so.6 for $HETSEQ"
expect_error "HETSEQ_CUDA_MODULE=$libc (not the module)" \
  "$libc is not hetseq's CUDA backend module \(.*hs_backend_cuda.*\)" \
  env HETSEQ_CUDA_MODULE="$libc" "$HETSEQ" train "$CNN" $tiny -o device=\"cuda\"
# a module of another build (another version or op table): refused, naming both identities
need_cmd cc gcc
cat > other.c <<'EOF'
#include <stddef.h>
const char *hs_backend_cuda_id(void) { return "hetseq 0.0.0, op table of 8 bytes"; }
const void *hs_backend_cuda(int r, char *w, size_t n) { (void)r; (void)w; (void)n; return NULL; }
const void *hs_backend_cuda_with_precision(const void *b, int p) { (void)p; return b; }
EOF
cc -shared -fPIC -o other.so other.c || fail "cc could not build other.so"
expect_error "HETSEQ_CUDA_MODULE=other.so (another build's module)" \
  "other.so is the CUDA backend module of another build of hetseq \(hetseq 0.0.0, op table of 8 bytes; this hetseq: hetseq [^,]*, op table of [0-9]+ bytes\)" \
  env HETSEQ_CUDA_MODULE="$WORK/other.so" "$HETSEQ" train "$CNN" $tiny -o device=\"cuda\"
HETSEQ_CUDA_MODULE=/nonexistent/hetseq_cuda.so "$HETSEQ" train "$CNN" $tiny -o device=\"auto\" \
  -o checkpoint.save_dir=\"auto\" > auto.log 2>&1 || { tail -40 auto.log; fail "device = auto without the module failed"; }
grep -q '| device = auto: the CUDA backend module /nonexistent/hetseq_cuda.so (HETSEQ_CUDA_MODULE) could not be loaded (.*cannot open shared object file.*; running on the CPU' auto.log ||
  { cat auto.log; fail "device = auto does not say that it runs on the CPU and why"; }
echo "ok: device = auto without the module runs on the CPU and says why"
pass
