# A "cluster" of hosts on one machine, for multi-host MPI runs over a real TCP/IP stack (bash; sourced
# by tests/cluster/test_multihost_netns.sh and bench/run_allreduce_bench.sh; needs root and iproute2):
# one network namespace per host, each with its own eth0 (one end of a veth pair whose other end is a
# port of one Linux bridge) and an address in a private 10.x.y.0/24, its own /etc/hosts naming every
# host (/etc/netns/<namespace>/hosts, which `ip netns exec` mounts over /etc/hosts), and, through
# tests/cluster/netns_rsh.sh, its own host name. The file system is the machine's, shared by all.
#
#   netns_cluster_up HEAD HOST...  makes the namespaces (HEAD is where mpirun runs, like a login node)
#                                  and sets NETNS_TAG (unique per run: names of every namespace, link
#                                  and file start with it), NETNS_CIDR (the subnet, for
#                                  btl_tcp_if_include / oob_tcp_if_include) and NETNS_RSH_PREFIX
#                                  (exported, for netns_rsh.sh); returns 1 with NETNS_ERROR set when
#                                  the machine cannot (no root, no CAP_NET_ADMIN, no bridge support)
#   netns_on HOST CMD...           runs CMD in HOST's namespace, as HOST (what netns_rsh.sh does)
#   netns_cluster_down             kills every process left in the namespaces, deletes them, the bridge
#                                  (the veth pairs go with their namespaces) and the hosts files; safe to
#                                  call more than once and after a partial netns_cluster_up
NETNS_TAG= NETNS_CIDR= NETNS_ERROR= NETNS_HOSTS= NETNS_BRIDGE= NETNS_MADE_ETC=
NETNS_RSH="${top_srcdir:-.}/tests/cluster/netns_rsh.sh"

netns_cluster_up() {
  PATH="$PATH:/usr/sbin:/sbin"
  [ "$(id -u)" = 0 ] || { NETNS_ERROR="network namespaces need root"; return 1; }
  command -v ip > /dev/null || { NETNS_ERROR="no ip command (Debian package iproute2)"; return 1; }
  command -v unshare > /dev/null || { NETNS_ERROR="no unshare command (util-linux)"; return 1; }
  local tries=0 a b c d e
  while :; do
    read -r a b c d e < <(od -An -N5 -tu1 /dev/urandom)
    [ -n "$e" ] || { NETNS_ERROR="cannot read /dev/urandom"; return 1; }
    # hs + 6 hex digits: interface names (at most 15 characters) stay short.
    NETNS_TAG=$(printf 'hs%02x%02x%02x' "$a" "$b" "$c")
    NETNS_CIDR="10.$((200 + d % 50)).$e.0/24"
    ip netns list 2> /dev/null | grep -q "^$NETNS_TAG-" || [ -e "/etc/netns/$NETNS_TAG-$1" ] || break
    tries=$((tries + 1)); [ $tries -lt 5 ] || { NETNS_ERROR="no free name"; return 1; }
  done
  local net=${NETNS_CIDR%.0/24} h i=0 ns err
  NETNS_BRIDGE=${NETNS_TAG}br
  export NETNS_RSH_PREFIX="$NETNS_TAG-"
  if ! err=$(ip netns add "$NETNS_TAG-$1" 2>&1); then
    NETNS_ERROR="cannot create a network namespace (ip netns add: $err): not root, or a container without CAP_NET_ADMIN/CAP_SYS_ADMIN"
    return 1
  fi
  NETNS_HOSTS=$1
  if ! err=$(ip link add "$NETNS_BRIDGE" type bridge 2>&1); then
    NETNS_ERROR="cannot create a Linux bridge (ip link add type bridge: $err)"
    return 1
  fi
  # Bridged frames must not go through the machine's iptables (Docker's FORWARD policy is DROP).
  ip link set "$NETNS_BRIDGE" type bridge nf_call_iptables 0 2> /dev/null
  ip link set "$NETNS_BRIDGE" up || { NETNS_ERROR="cannot bring the bridge up"; return 1; }
  for h in "$@"; do
    ns=$NETNS_TAG-$h
    if [ $i -gt 0 ]; then
      ip netns add "$ns" || { NETNS_ERROR="ip netns add $ns failed"; return 1; }
      NETNS_HOSTS="$NETNS_HOSTS $h"
    fi
    if ! err=$({ ip link add "${NETNS_TAG}h$i" type veth peer name "${NETNS_TAG}n$i" netns "$ns" &&
                 ip link set "${NETNS_TAG}h$i" master "$NETNS_BRIDGE" up &&
                 ip -n "$ns" link set "${NETNS_TAG}n$i" name eth0 &&
                 ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0 &&
                 ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up; } 2>&1); then
      NETNS_ERROR="cannot connect $ns to the bridge with a veth pair: $err"
      return 1
    fi
    i=$((i + 1))
  done
  # Every host's /etc/hosts names every host (no DNS look-ups, which time out in a namespace).
  local hosts="127.0.0.1 localhost" j=0
  [ -d /etc/netns ] || NETNS_MADE_ETC=yes
  for h in "$@"; do hosts="$hosts
$net.$((10 + j)) $h"; j=$((j + 1)); done
  for h in "$@"; do
    mkdir -p "/etc/netns/$NETNS_TAG-$h" && printf '%s\n' "$hosts" > "/etc/netns/$NETNS_TAG-$h/hosts" \
      || { NETNS_ERROR="cannot write /etc/netns/$NETNS_TAG-$h/hosts"; return 1; }
  done
  return 0
}

netns_on() {
  local h=$1; shift
  ip netns exec "$NETNS_TAG-$h" unshare --uts -- /bin/sh -c 'hostname "$1" || exit 1; shift; exec "$@"' \
    netns_on "$h" "$@"
}

netns_cluster_down() {
  [ -n "$NETNS_TAG" ] || return 0
  local h ns pids i
  PATH="$PATH:/usr/sbin:/sbin"
  for h in $NETNS_HOSTS; do
    ns=$NETNS_TAG-$h
    pids=$(ip netns pids "$ns" 2> /dev/null)
    [ -z "$pids" ] || kill -TERM $pids 2> /dev/null
  done
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids=
    for h in $NETNS_HOSTS; do pids="$pids$(ip netns pids "$NETNS_TAG-$h" 2> /dev/null)"; done
    [ -n "$pids" ] || break
    sleep 0.3
  done
  for h in $NETNS_HOSTS; do
    ns=$NETNS_TAG-$h
    pids=$(ip netns pids "$ns" 2> /dev/null)
    [ -z "$pids" ] || kill -KILL $pids 2> /dev/null
    ip netns del "$ns" 2> /dev/null
    rm -rf "/etc/netns/$ns"
  done
  # A host whose namespace was not made yet may have a hosts file.
  rm -rf /etc/netns/"$NETNS_TAG"-*
  [ -z "$NETNS_MADE_ETC" ] || rmdir /etc/netns 2> /dev/null   # only if we made it and it is empty
  ip link del "$NETNS_BRIDGE" 2> /dev/null
  for i in 0 1 2 3 4 5 6 7 8 9; do ip link del "${NETNS_TAG}h$i" 2> /dev/null; done
  NETNS_HOSTS= NETNS_TAG=
}
