# A real Slurm on this machine runs the job script users submit (batch/mnist.slurm), as sbatch and
# srun run it on a cluster:
#  1. the script prepares the data (srun, 1 task), trains a few updates on 2 ranks started by
#     `srun --mpi=pmix` (one MPI job of 2 ranks, not 2 singletons), checkpoints, writes metrics;
#  2. the time-limit path: a job with a 1-minute limit and --signal=B:USR1@50 gets SIGUSR1 from
#     slurmctld, the script passes it to the ranks, they checkpoint and exit 75, the script requeues the
#     job, and the requeued job resumes from the checkpoint to the last update.
# batch/hetero.slurm is not run: Slurm does not place two components of a heterogeneous job on one
# node (the backfill scheduler, the only one that starts such jobs, plans the second component after
# the first has ended), and this Slurm has one node.
# Slurm (Debian's slurm-wlm: slurmctld + slurmd) and munged run from a private directory: their own
# slurm.conf, munge key and socket, state, spool and log directories and free ports, so nothing of the
# machine's is used or touched; everything is stopped and removed when the test ends, pass or fail.
# Needs the packages slurm-wlm (with slurm-wlm-basic-plugins' pmix plugin), munge, hdf5-tools and
# dataset-fashion-mnist: fails naming the package without one. Needs root (slurmd starts jobs as their
# user): skips (77) for a user who is not (the README says so). No cgroup is needed (slurm.conf and
# cgroup.conf below), so it runs in containers and chroots without /sys/fs/cgroup. About 50 s; every
# wait is bounded (3.5 minutes at most).
#
# Timing facts of Slurm 22.05 the test is built on: slurmctld checks time limits, and so sends the
# --signal warning, every 30 s, so the signal comes 10-40 s after the job starts; a requeued job waits
# AuthInfo's cred_expire (set to 10 s here; 120 s by default) before it starts again; the requeued run
# has the same limit and would be signalled again, so once the job is requeued the test gives it a
# 5-minute limit (`scontrol update`, as a user extends a job) and sets where its training ends.
. "$top_srcdir/tests/lib.sh"
T0=$SECONDS
SRC=$(cd "$top_srcdir" && pwd)
HETSEQ_BIN=$(cd "$(dirname "$HETSEQ")" && pwd)/$(basename "$HETSEQ")
IDX="${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"

[ "$(id -u)" = 0 ] || skip "a private Slurm needs root (slurmd runs jobs as their user)"
for cmd in slurmctld slurmd sbatch srun scontrol squeue scancel sinfo; do need_cmd $cmd slurm-wlm; done
for cmd in munged munge unmunge; do need_cmd $cmd munge; done
need_cmd h5dump hdf5-tools
need_cmd hostname hostname
PATH="$PATH:/usr/sbin:/sbin"
[ -d "$IDX" ] || fail "no Fashion-MNIST IDX files in $IDX: install Debian's dataset-fashion-mnist (or set FASHION_MNIST_DIR)"

# No outer Slurm job's variables may leak into ours.
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done

S="$WORK/slurm"
mkdir -p "$S/state" "$S/spool" "$S/log" "$S/tmp" "$S/munge"
chmod 711 "$S/munge"
export SLURM_CONF="$S/slurm.conf"

cleanup() {
  set +e
  if [ -f "$S/slurmctld.pid" ]; then
    timeout 10 scancel --quiet --user=root 2> /dev/null
    local i
    for i in $(seq 1 30); do [ -z "$(timeout 5 squeue -h 2> /dev/null)" ] && break; sleep 0.5; done
    timeout 10 scontrol shutdown > /dev/null 2>&1
  fi
  local f pid
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    pid=$(cat "$S/$f" 2> /dev/null) || continue
    [ -n "$pid" ] || continue
    [ $f = munge/munged.pid ] && kill "$pid" 2> /dev/null
    for i in $(seq 1 20); do kill -0 "$pid" 2> /dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2> /dev/null
  done
  # Whatever our daemons started and left (job steps, ranks): the processes that have our slurm.conf
  # in their environment.
  for pid in $(grep -l -s -F "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ | cut -d/ -f3); do
    [ "$pid" != $$ ] && kill -9 "$pid" 2> /dev/null
  done
  remove_scratch
}
trap cleanup EXIT

# ---- munge: its own key and socket ------------------------------------------------------------------
dd if=/dev/urandom bs=1 count=1024 of="$S/munge/munge.key" 2> /dev/null
chmod 400 "$S/munge/munge.key"
munged --force --socket="$S/munge/munge.sock" --key-file="$S/munge/munge.key" --log-file="$S/munge/munged.log" \
  --pid-file="$S/munge/munged.pid" --seed-file="$S/munge/munged.seed" \
  || { cat "$S/munge/munged.log"; fail "munged does not start (its log is above)"; }
for i in $(seq 1 20); do [ -S "$S/munge/munge.sock" ] && break; sleep 0.25; done
munge -S "$S/munge/munge.sock" -n | unmunge -S "$S/munge/munge.sock" > /dev/null \
  || { cat "$S/munge/munged.log"; fail "munge credentials do not round-trip"; }

# ---- slurm.conf --------------------------------------------------------------------------------------
port_used() { # PORT: something listens on it (TCP, IPv4 or IPv6)
  local hex; hex=$(printf ':%04X' "$1")
  awk -v h="$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2> /dev/null
}
PORT=
for i in $(seq 1 50); do
  p=$((20000 + RANDOM % 30000))
  port_used $p || port_used $((p + 1)) || { PORT=$p; break; }
done
[ -n "$PORT" ] || fail "no two free TCP ports found"
NODE=$(hostname -s)
CPUS=$(nproc); [ "$CPUS" -ge 2 ] || CPUS=2
cat > "$SLURM_CONF" << EOF
ClusterName=hetseqtest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it starts again (default 120 s)
AuthInfo=socket=$S/munge/munge.sock,cred_expire=10
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
TmpFS=$S/tmp
# No cgroups in a container or chroot: track processes by their parent, no task plugin, no cgroup
# accounting (cgroup.conf below for the cgroup plugin slurmd loads anyway).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# No default: the script must ask for pmix itself (else srun starts singletons).
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=30
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
# slurmd 22.05 initialises a cgroup plugin even when nothing uses it; the default (autodetect) looks
# at /sys/fs/cgroup and refuses to start where nothing is mounted there ("No filesystem mounted on
# /sys/fs/cgroup"). The v1 plugin loads without looking; with the plugins above it is never used.
# (cgroup.conf is read from slurm.conf's directory.)
echo "CgroupPlugin=cgroup/v1" > "$S/cgroup.conf"

slurmctld -f "$SLURM_CONF" || { cat "$S/log/slurmctld.log"; fail "slurmctld did not start"; }
slurmd -f "$SLURM_CONF" || { cat "$S/log/slurmd.log"; fail "slurmd did not start"; }
for i in $(seq 1 60); do
  state=$(timeout 5 sinfo -h -n "$NODE" -o %T 2> /dev/null)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || { tail -n 20 "$S"/log/*.log; fail "the node is not idle after 30 s (state: $state)"; }
srun --mpi=list 2>&1 | grep -q pmix ||
  fail "this Slurm has no pmix MPI plugin (srun --mpi=list), which Open MPI needs: install Debian's slurm-wlm-basic-plugins"
echo "ok: slurmctld and slurmd up on ports $PORT-$((PORT + 1)), node $NODE idle ($((SECONDS - T0)) s)"

# ---- what the job script needs: an installed hetseq (bin/, share/hetseq/conf/) ------------------
mkdir -p root/bin root/share/hetseq/conf
ln -s "$HETSEQ_BIN" root/bin/hetseq
cp "$SRC/conf/mnist.cfg" root/share/hetseq/conf/
export HETSEQ_ROOT="$WORK/root" PATH="$WORK/root/bin:$PATH"
export WORK_DIR="$WORK" IDX_DIR="$IDX" DATA_FILE="$WORK/data/fashion-mnist.h5"
# 2 ranks x 1 thread on one node (the script's #SBATCH lines ask for 2 nodes x 2 ranks x 4 threads).
SB=(--nodes=1 --ntasks-per-node=2 --cpus-per-task=1)

job_field() { # ID FIELD
  timeout 10 scontrol show job -o "$1" 2> /dev/null | tr ' ' '\n' | sed -n "s/^$2=//p"
}
wait_done() { # ID SECONDS: wait until the job has ended (any final state)
  local id=$1 end=$((SECONDS + $2)) st
  while [ $SECONDS -lt $end ]; do
    st=$(job_field "$id" JobState)
    case "$st" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;; esac
    sleep 1
  done
  return 1
}
last_updates() { # SAVE_DIR: num_updates of the last train record
  grep '"type": "train"' "$1/metrics.jsonl" 2> /dev/null | tail -n 1 | sed -n 's/.*"num_updates": \([0-9]*\).*/\1/p'
}
saved_updates() { h5dump -a /train_state/num_updates "$1" 2> /dev/null | sed -n 's/^ *(0): *//p'; }

# ---- 1. train a few updates ----------------------------------------------------------------------------
K=20
t=$SECONDS
jid=$(SAVE_DIR="$WORK/ck1" sbatch --parsable "${SB[@]}" --output="$WORK/job1.out" \
  "$SRC/batch/mnist.slurm" -o training.max_update=$K -o log.interval=1) || fail "sbatch refused batch/mnist.slurm"
wait_done "$jid" 60 || { cat job1.out; fail "job $jid did not end within 60 s"; }
state=$(job_field "$jid" JobState) code=$(job_field "$jid" ExitCode)
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || { cat job1.out; fail "job $jid: $state, exit code $code"; }
grep -q "prep mnist: 60000 train" job1.out || { cat job1.out; fail "job $jid did not prepare the data"; }
[ -f "$DATA_FILE" ] || fail "job $jid left no $DATA_FILE"
grep -q "training on 2 rank(s)" job1.out \
  || { cat job1.out; fail "job $jid: the ranks did not form one MPI job of 2 (srun --mpi=pmix)"; }
[ -f ck1/checkpoint_last.h5 ] || { cat job1.out; fail "job $jid wrote no checkpoint"; }
[ "$(last_updates ck1)" = $K ] || { cat job1.out; fail "job $jid: metrics end at update $(last_updates ck1), expected $K"; }
grep -q '"world_size": 2' ck1/metrics.jsonl || fail "job $jid: metrics do not say world_size 2"
[ "$(saved_updates ck1/checkpoint_last.h5)" = $K ] || fail "job $jid: checkpoint_last.h5 is not of update $K"
echo "ok: job $jid (sbatch batch/mnist.slurm, srun --mpi=pmix, 2 ranks) prepared the data, trained $K updates," \
  "checkpoint and metrics written ($((SECONDS - t)) s)"

# ---- 2. the time limit: signal, checkpoint, exit 75, requeue, resume ---------------------------------
# The job's experiment file (CONFIG, which the script honours) trains "for ever" until the signal; once
# the job is requeued, the test sets the end of training to 10 updates after the one the signal stopped
# it at (a user editing the experiment between runs), because when the signal lands cannot be known
# in advance, and a fixed end would make the resumed run take as long as the machine's load says.
sed 's/^\( *max_update = \)0;/\1100000;/' root/share/hetseq/conf/mnist.cfg > job2.cfg
grep -q 'max_update = 100000;' job2.cfg || fail "conf/mnist.cfg no longer has 'max_update = 0;'"
t=$SECONDS
jid=$(SAVE_DIR="$WORK/ck2" CONFIG="$WORK/job2.cfg" sbatch --parsable "${SB[@]}" --output="$WORK/job2.out" \
  --open-mode=append --time=1 --signal=B:USR1@50 --requeue "$SRC/batch/mnist.slurm" -o log.interval=1) \
  || fail "sbatch refused batch/mnist.slurm with a time limit"
end=$((SECONDS + 60))
restarts=0
while [ $SECONDS -lt $end ]; do
  restarts=$(job_field "$jid" Restarts); [ "${restarts:-0}" -ge 1 ] && break
  case "$(job_field "$jid" JobState)" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
  sleep 0.5
done
[ "${restarts:-0}" -ge 1 ] || { cat job2.out; fail "job $jid was not requeued within 60 s ($(job_field "$jid" JobState))"; }
# The resumed run has the same limit and would get the signal again: give it 5 minutes.
timeout 10 scontrol update JobId="$jid" TimeLimit=5 || fail "cannot extend job $jid's time limit"
line=$(grep -m1 "stopped by SIGUSR1 after update" job2.out) || { cat job2.out; fail "job $jid: no 'stopped by SIGUSR1' line"; }
n=$(printf '%s\n' "$line" | sed 's/.*after update \([0-9]*\).*/\1/')
[ "$n" -gt 0 ] || fail "job $jid stopped after update $n"
[ -f ck2/checkpoint_last.h5 ] || fail "job $jid: no checkpoint_last.h5 after the signal"
M=$((n + 10))
sed -i "s/^\( *max_update = \)100000;/\1$M;/" job2.cfg
echo "ok: job $jid: $line; requeued after $((SECONDS - t)) s; its resumed run ends at update $M, time limit now 5 minutes"
wait_done "$jid" 60 || { cat job2.out; fail "the requeued job $jid did not end within 60 s"; }
state=$(job_field "$jid" JobState) code=$(job_field "$jid" ExitCode) restarts=$(job_field "$jid" Restarts)
[ "$state" = COMPLETED ] && [ "$code" = 0:0 ] || { cat job2.out; fail "requeued job $jid: $state, exit code $code"; }
[ "$restarts" = 1 ] || { cat job2.out; fail "job $jid ran $((restarts + 1)) times, expected 2"; }
grep -q "resuming from $WORK/ck2/checkpoint_last.h5 (.*$n updates in all)" job2.out \
  || { cat job2.out; fail "the requeued job $jid did not resume from update $n"; }
[ "$(last_updates ck2)" = $M ] || { cat job2.out; fail "job $jid: metrics end at update $(last_updates ck2), expected $M"; }
[ "$(saved_updates ck2/checkpoint_last.h5)" = $M ] || fail "job $jid: checkpoint_last.h5 is not of update $M"
echo "ok: requeued job $jid resumed from update $n and completed at $M ($((SECONDS - t)) s for the job)"
echo "all in $((SECONDS - T0)) s"
pass
