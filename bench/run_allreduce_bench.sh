#!/bin/bash
# All-reduce time against message size on this machine (the measurements behind docs/cluster.md's
# "Scaling model"): bench/allreduce_bench over shared memory (Open MPI's vader BTL, 2 and 4 ranks),
# then over TCP between network namespaces joined by a Linux bridge (tests/cluster/netns_cluster.sh:
# 3 "hosts" with 1 rank each, then 1 + 2 + 1 = 4 ranks), and prints the tables and the fitted latency
# and bandwidth. The TCP part needs root and network namespaces; it is skipped (said so) without.
# Everything it creates is removed when it ends.
#   usage (in the build directory, after `make bench/allreduce_bench`):
#     $top_srcdir/bench/run_allreduce_bench.sh [MAX_BYTES [REPS]]     (default 256M, 11)
set -u
max=${1:-256M}
reps=${2:-11}
here=$(cd "$(dirname "$0")" && pwd)
top_srcdir=${top_srcdir:-$(cd "$here/.." && pwd)}
builddir=$(cd "${top_builddir:-.}" && pwd)
bench=$builddir/bench/allreduce_bench
mpirun=${MPIRUN:-mpirun}
[ -x "$bench" ] || { echo "bench/allreduce_bench not built: run 'make bench/allreduce_bench' in the build directory" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(mpirun --version | head -1)"

for np in 2 4; do
  timeout -k 5 300 "$mpirun" --oversubscribe -np $np --mca pml ob1 --mca btl self,vader --bind-to none \
    --mca mpi_yield_when_idle 1 "$bench" --max "$max" --reps "$reps" --label "shared memory (vader), one host"
  echo
done

. "$top_srcdir/tests/cluster/netns_cluster.sh"
trap netns_cluster_down EXIT
trap 'exit 130' INT TERM HUP
if ! netns_cluster_up head node1 node2 node3; then
  echo "# TCP between network namespaces: skipped ($NETNS_ERROR)"
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/allreduce_bench.XXXXXX")
trap 'netns_cluster_down; rm -rf "$work"' EXIT
printf 'node1 slots=1\nnode2 slots=1\nnode3 slots=1\n' > "$work/hosts3"
printf 'node1 slots=1\nnode2 slots=2\nnode3 slots=1\n' > "$work/hosts4"
for np in 3 4; do
  netns_on head timeout -k 5 300 "$(command -v "$mpirun")" --hostfile "$work/hosts$np" -np $np \
    --mca plm_rsh_agent "$NETNS_RSH" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include "$NETNS_CIDR" --mca oob_tcp_if_include "$NETNS_CIDR" \
    --bind-to none --mca mpi_yield_when_idle 1 \
    "$bench" --max "$max" --reps "$reps" --label "TCP over veth + bridge, hosts $(paste -sd' ' "$work/hosts$np" | sed 's/ slots=/:/g')"
  echo
done
