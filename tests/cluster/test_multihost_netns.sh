# A multi-host job over a real network stack, on one machine: four network namespaces joined by a
# Linux bridge (tests/cluster/netns_cluster.sh) stand for a login node "head" and three compute nodes
# node1, node2, node3, each with its own eth0, 10.x.y.0/24 address, /etc/hosts and host name. mpirun
# runs on head with a hostfile of 1, 2 and 1 slots and starts an orted on each node through an ssh
# stand-in (tests/cluster/netns_rsh.sh as plm_rsh_agent); the 4 ranks of `hetseq train` (the tests'
# MNIST experiment, 20 updates) talk over TCP only (btl tcp,self, pinned to the bridge's subnet), and
# the model they train must equal the one 4 ranks on this host train over shared memory (h5compare,
# 1e-5). Also checked: the ranks ran on the three nodes, the gradients crossed the veth links (byte
# counters), and mpirun left no process behind in the namespaces. Every namespace, link, hosts file
# and process the test makes is removed when it ends, pass or fail (names unique per run).
# Needs iproute2 (ip), util-linux (unshare) and procps (ps): fails naming the package without them.
# Needs root and the right to make network namespaces (CAP_NET_ADMIN): skips (77) without (a container
# not allowed to, or a user who is not root; the README says so). About 30 s.
. "$top_srcdir/tests/lib.sh"
. "$top_srcdir/tests/cluster/netns_cluster.sh"
# Long commands run in the background and are waited for, so that a signal to the test (a CI time
# limit, ^C) is acted on at once, not when they end: their timeout passes it on to mpirun.
CHILD=
run_bg() { "$@" & CHILD=$!; wait $CHILD; local rc=$?; CHILD=; return $rc; }
trap 'netns_cluster_down; remove_scratch' EXIT
trap '[ -z "$CHILD" ] || kill -TERM $CHILD 2> /dev/null; exit 130' INT TERM HUP
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
CMP="$top_builddir/tests/tools/h5compare"
HETSEQ_BIN=$(cd "$(dirname "$HETSEQ")" && pwd)/$(basename "$HETSEQ")
RSH=$(cd "$top_srcdir/tests/cluster" && pwd)/netns_rsh.sh
REAL_MPIRUN=$(command -v "$MPIRUN") || fail "no mpirun ($MPIRUN)"
need_cmd ip iproute2
need_cmd unshare util-linux
need_cmd ps procps
need_cmd hostname hostname
[ -f "$DATA" ] || fail "no $DATA (make check builds it)"
[ -x "$CMP" ] || fail "no $CMP (make check builds it)"
UPDATES=20

if ! netns_cluster_up head node1 node2 node3; then
  case "$NETNS_ERROR" in
    *"need root"* | *"not permitted"*) skip "$NETNS_ERROR" ;; # a privilege, not an install step
    *) fail "$NETNS_ERROR" ;;
  esac
fi
echo "cluster $NETNS_TAG: namespaces $(printf "$NETNS_TAG-%s " $NETNS_HOSTS), bridge $NETNS_BRIDGE, subnet $NETNS_CIDR"
printf 'node1 slots=1\nnode2 slots=2\nnode3 slots=1\n' > hostfile

train_args() { # save_dir
  echo "$HETSEQ_BIN" train "$CFG" -o "data.path=\"$DATA\"" -o training.max_update=$UPDATES \
    -o training.max_epoch=0 -o "checkpoint.save_dir=\"$1\""
}

# The reference: 4 ranks on this host, shared memory.
t0=$SECONDS
run_bg timeout -k 5 120 "$REAL_MPIRUN" --allow-run-as-root --oversubscribe -np 4 --mca btl self,vader \
  --mca rmaps_base_oversubscribe 1 $(train_args "$WORK/onehost") > onehost.log 2>&1 \
  || { cat onehost.log; fail "the 4-rank run on one host failed"; }
echo "one host, 4 ranks (vader): $((SECONDS - t0)) s"

rx_bytes() { ip netns exec "$NETNS_TAG-$1" cat /sys/class/net/eth0/statistics/rx_bytes; }
rx0=$(rx_bytes node1)

# The multi-host job, from the head node. --bind-to none: every orted believes it has the machine's
# cores to itself, so default binding would stack ranks of different "hosts" on the same core.
t0=$SECONDS
run_bg timeout -k 5 120 ip netns exec "$NETNS_TAG-head" unshare --uts -- \
  /bin/sh -c 'hostname head && exec "$@"' sh "$REAL_MPIRUN" --hostfile hostfile -np 4 \
  --mca plm_rsh_agent "$RSH" \
  --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$NETNS_CIDR" \
  --mca oob_tcp_if_include "$NETNS_CIDR" \
  --bind-to none --mca mpi_yield_when_idle 1 -x OMP_NUM_THREADS \
  sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname)"; exec "$@"' rank $(train_args "$WORK/multihost") \
  > multihost.log 2>&1
rc=$?
[ $rc -eq 0 ] || { cat multihost.log; fail "the multi-host run failed (exit $rc$([ $rc -ne 124 ] || echo ': timed out'))"; }
echo "3 hosts (1+2+1 slots), 4 ranks (tcp): $((SECONDS - t0)) s"
grep '^rank ' multihost.log | sort

for want in "rank 0 on node1" "rank 1 on node2" "rank 2 on node2" "rank 3 on node3"; do
  grep -qx "$want" multihost.log || { cat multihost.log; fail "expected '$want' (hostfile 1, 2, 1 slots)"; }
done

# The gradients went over the wire: node1 received at least half of the model per update (ring or
# recursive-doubling all-reduce of the CNN's 1.2 M floats, ~4.8 MB).
rx=$(( $(rx_bytes node1) - rx0 ))
echo "node1 eth0 received $rx bytes"
[ "$rx" -gt $((UPDATES * 2400000)) ] || fail "only $rx bytes reached node1 over its veth: the ranks did not talk over TCP"

"$CMP" multihost/checkpoint_last.h5 onehost/checkpoint_last.h5 1e-5 \
  || fail "the model trained on 3 hosts over TCP differs from the one trained on one host"

# mpirun must have taken its orteds and ranks down with it.
left=
for i in $(seq 1 20); do
  left=$(for h in $NETNS_HOSTS; do ip netns pids "$NETNS_TAG-$h"; done)
  [ -n "$left" ] || break
  sleep 0.25
done
[ -z "$left" ] || fail "processes left in the namespaces after mpirun ended: $(ps -o pid=,args= -p $(echo $left | tr ' ' ,))"

# And the test leaves nothing behind.
tag=$NETNS_TAG
netns_cluster_down
ip netns list | grep -q "^$tag-" && fail "namespaces $tag-* still exist"
ip link show | grep -q "$tag" && fail "links $tag* still exist"
ls -d /etc/netns/"$tag"-* > /dev/null 2>&1 && fail "/etc/netns/$tag-* still exist"
pass "4 ranks on 3 namespaced hosts over TCP train the same model as 4 ranks on one host"
