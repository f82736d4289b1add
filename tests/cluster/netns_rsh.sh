#!/bin/sh
# An ssh stand-in for Open MPI's rsh launcher (plm_rsh_agent) on a "cluster" of network namespaces on
# one machine (tests/cluster/netns_cluster.sh makes them):
#
#   netns_rsh.sh [ssh options] HOST COMMAND...
#
# runs COMMAND (the words joined by spaces and given to /bin/sh -c, as ssh gives them to the remote
# shell) inside the network namespace of HOST, with HOST as its host name (a private UTS namespace),
# and waits for it, so mpirun sees it as a remote login that lasts as long as the orted it started.
# HOST's namespace is "$NETNS_RSH_PREFIX$HOST" (e.g. hs1a2b3c-node2 for node2), or HOST itself when
# NETNS_RSH_PREFIX is unset. `ip netns exec` also bind-mounts /etc/netns/<namespace>/hosts, if there is
# one, over /etc/hosts, so each "host" resolves the others' names.
# Exit status 255 (as ssh) when HOST has no namespace or the command cannot be started.
# ssh options Open MPI or a user may pass before HOST (plm_rsh_args) are accepted and ignored.
while [ $# -gt 0 ]; do
  case $1 in
    -[oplieFJLRDSWwbcmOEIQ]) shift 2 ;;   # options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "usage: netns_rsh.sh [ssh options] HOST COMMAND..." >&2; exit 255; }
host=$1; shift
ns=${NETNS_RSH_PREFIX-}$host
PATH="$PATH:/usr/sbin:/sbin"
if ! ip netns list 2> /dev/null | grep -q "^$ns\( \|$\)"; then
  echo "netns_rsh.sh: no network namespace $ns for host $host" >&2
  exit 255
fi
exec ip netns exec "$ns" unshare --uts -- /bin/sh -c \
  'hostname "$1" || exit 255; shift; exec /bin/sh -c "$*"' netns_rsh "$host" "$@"
