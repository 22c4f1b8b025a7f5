#!/usr/bin/env bash
# A cluster of hosts on one machine, for multi-node runs and tests: each host is a network
# namespace with its own hostname (a UTS namespace), address, /etc/hosts and a shaped link to a
# bridge that stands for the switch. The machine's own network is not touched: the bridge lives
# in a namespace of its own, and only private addresses are used.
#
#   cluster.sh up N [--rate RATE] [--delay MS] [--subnet A.B.C]
#                                 N hosts node1 .. nodeN at A.B.C.11 .. (default 10.213.7); each
#                                 host's egress shaped to RATE (tc tbf, e.g. 400mbit; default: not
#                                 shaped) plus MS of delay (tc netem, where the kernel has it)
#   cluster.sh down               remove exactly what `up` made (recorded in the state dir)
#   cluster.sh status             the hosts, their links and shaping
#   cluster.sh run HOST CMD...    run CMD on HOST (its network, hostname and /etc/hosts)
#   cluster.sh agent HOST CMD...  the same, for mpirun's launch agent (CMD is one shell string)
#   cluster.sh mpirun ARGS...     mpirun on node1 with the launch agent and the cluster's
#                                 interfaces (ARGS: --host node1:2,node2:2 ..., the program)
#   cluster.sh link HOST down|up|loss PCT|clear|dropped
#                                 faults: the host's link down or up again, PCT % of the packets
#                                 it sends dropped (nftables), or no loss; `dropped` prints how
#                                 many packets the loss has dropped so far (0 without one)
#
# State: $ASTERIA_CLUSTER_DIR (default /run/asteria-cluster): hosts, the UTS namespace files, the
# agent, env.sh (ASTERIA_CLUSTER_* for callers), and nodetmp/, which on each host is that host's
# own directory (local/HOST): node-local scratch. ASTERIA_CLUSTER_PREFIX (default asteria) names
# the namespaces, so that two clusters (two state dirs) can exist side by side. `up` on a state dir that holds a cluster
# (after a crash, or another N) removes that one first, so it is safe to re-run. Needs root,
# iproute2 (ip, tc), util-linux (unshare, nsenter) and nftables for `link loss`.
set -euo pipefail

STATE=${ASTERIA_CLUSTER_DIR:-/run/asteria-cluster}
# Network namespaces PREFIX-sw (the switch), PREFIX-node1, ...; veths PREFIX-eK / PREFIX-pK.
PREFIX=${ASTERIA_CLUSTER_PREFIX:-asteria}
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,8}$ ]] || { echo "cluster: error: ASTERIA_CLUSTER_PREFIX '$PREFIX': 1-9 lowercase letters or digits" >&2; exit 2; }
SELF=$(readlink -f "$0")
# A cluster that exists keeps the prefix it was made with.
[[ -f $STATE/prefix ]] && PREFIX=$(<"$STATE/prefix")

die() { echo "cluster: error: $*" >&2; exit 1; }
say() { echo "cluster: $*"; }
usage() { sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

need_root() { [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"; }
hosts() { [[ -f $STATE/hosts ]] && awk '{print $1}' "$STATE/hosts"; }
host_ns() { echo "$PREFIX-$1"; }
host_ip() { awk -v h="$1" '$1 == h {print $2}' "$STATE/hosts"; }
known_host() { [[ -f $STATE/hosts ]] && grep -q "^$1 " "$STATE/hosts"; }

# Runs a command inside HOST: its network namespace, its UTS namespace (hostname) and a private
# mount namespace in which its hosts file is /etc/hosts and STATE/nodetmp is its own scratch
# directory (node-local storage: Slurm's TmpFS, which other hosts must not share). (Not
# `ip netns exec`, which also remounts /sys for the namespace and so hides the machine's cgroups,
# which slurmd needs.) Every step execs: the command keeps this process's pid.
in_host() {
  local h=$1 ns
  shift
  known_host "$h" || die "no host '$h' in this cluster (hosts: $(hosts | tr '\n' ' '))"
  ns=$(host_ns "$h")
  exec nsenter --net="/run/netns/$ns" --uts="$STATE/uts/$h" -- unshare --mount --propagation private -- \
    /bin/sh -c 'mount --bind "$0" /etc/hosts && mount --bind "$1" "$2" && shift 2 && exec "$@"' \
    "/etc/netns/$ns/hosts" "$STATE/local/$h" "$STATE/nodetmp" "$@"
}

netem_available() {
  # The kernel may lack sch_netem (it is a module); try it on a scratch namespace's veth.
  local ns=$PREFIX-probe ok=1
  ip netns add "$ns" 2>/dev/null || return 1
  ip -n "$ns" link add p0 type veth peer name p1 && ip -n "$ns" link set p0 up &&
    ip netns exec "$ns" tc qdisc add dev p0 root netem delay 1ms 2>/dev/null && ok=0
  ip netns del "$ns"
  return $ok
}

down() {
  need_root
  [[ -d $STATE ]] || { say "nothing to remove ($STATE does not exist)"; return 0; }
  local h
  if [[ -f $STATE/hosts ]]; then
    for h in $(hosts); do
      ip netns del "$(host_ns "$h")" 2>/dev/null || true
      if [[ -e $STATE/uts/$h ]]; then umount "$STATE/uts/$h" 2>/dev/null || true; rm -f "$STATE/uts/$h"; fi
      rm -rf "/etc/netns/$(host_ns "$h")"
    done
  fi
  [[ -f $STATE/switch ]] && ip netns del "$(cat "$STATE/switch")" 2>/dev/null || true
  rm -rf "$STATE"
  say "removed"
}

up() {
  need_root
  local n=${1:-}
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "up needs a number of hosts (1 to 200), got '$n'"
  shift
  local rate="" delay="" subnet=10.213.7
  while (($#)); do
    case $1 in
      --rate) rate=${2:?--rate needs a value, e.g. 400mbit}; shift 2 ;;
      --delay) delay=${2:?--delay needs milliseconds}; shift 2 ;;
      --subnet) subnet=${2:?--subnet needs A.B.C}; shift 2 ;;
      *) die "unknown option '$1'" ;;
    esac
  done
  [[ $subnet =~ ^(10\.[0-9]+\.[0-9]+|192\.168\.[0-9]+|172\.(1[6-9]|2[0-9]|3[01])\.[0-9]+)$ ]] ||
    die "--subnet $subnet: use a private A.B.C (10.x.y, 172.16-31.y, 192.168.y)"
  [[ -z $delay || $delay =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--delay $delay: milliseconds, e.g. 2"
  if [[ -n $delay ]] && ! netem_available; then
    die "--delay needs tc's netem qdisc, which this kernel ($(uname -r)) does not have (no sch_netem); shape the rate only"
  fi
  command -v nsenter >/dev/null && command -v unshare >/dev/null || die "needs util-linux (nsenter, unshare)"
  command -v tc >/dev/null || die "needs iproute2's tc"
  [[ -d $STATE ]] && down >/dev/null
  mkdir -p "$STATE/uts" "$STATE/nodetmp"
  local sw=$PREFIX-sw
  echo "$PREFIX" >"$STATE/prefix"
  echo "$sw" >"$STATE/switch"
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local i h ns ip hosts_file
  hosts_file=$(printf '127.0.0.1 localhost\n'; for ((i = 1; i <= n; i++)); do echo "$subnet.$((10 + i)) node$i"; done)
  for ((i = 1; i <= n; i++)); do
    h=node$i ns=$(host_ns "$h") ip=$subnet.$((10 + i))
    echo "$h $ip" >>"$STATE/hosts"
    ip netns add "$ns"
    ip link add "$PREFIX-e$i" type veth peer name "$PREFIX-p$i"
    ip link set "$PREFIX-e$i" netns "$ns"
    ip link set "$PREFIX-p$i" netns "$sw"
    ip -n "$sw" link set "$PREFIX-p$i" master br0
    ip -n "$sw" link set "$PREFIX-p$i" up
    ip -n "$ns" link set "$PREFIX-e$i" name eth0
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # TCP gives up on an unreachable peer after 25.4 s of retransmissions at the shortest timeout,
    # up to twice that under load (the default, 15 retries, is ~15 minutes): mpirun then declares
    # a host behind a dead link lost instead of waiting on it.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=6
    if [[ -n $rate ]]; then
      # The host's egress: a token bucket at RATE. Its burst (256 KiB: 3.3 ms at 630 Mbit/s) holds
      # a whole GSO packet (64 KiB + headers): with less, tbf cuts every such packet into 1500-byte
      # frames, each then bridged and received in softirq on this machine's cores, which measured
      # 16 % of both cores at 630 Mbit/s (a real host's NIC segments in hardware).
      ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "$rate" burst 256kb latency 100ms
      [[ -n $delay ]] && ip netns exec "$ns" tc qdisc add dev eth0 parent 1:1 handle 10: netem delay "${delay}ms"
    elif [[ -n $delay ]]; then
      ip netns exec "$ns" tc qdisc add dev eth0 root handle 10: netem delay "${delay}ms"
    fi
    mkdir -p "/etc/netns/$ns"
    echo "$hosts_file" >"/etc/netns/$ns/hosts"
    touch "$STATE/uts/$h"
    mkdir -p "$STATE/local/$h"
    chmod 1777 "$STATE/local/$h"
    unshare --uts="$STATE/uts/$h" hostname "$h"
  done
  # mpirun's launch agent: `agent HOST COMMAND...`, the command being one shell string.
  printf '#!/bin/sh\nASTERIA_CLUSTER_DIR=%q ASTERIA_CLUSTER_PREFIX=%q exec %q agent "$@"\n' "$STATE" "$PREFIX" "$SELF" >"$STATE/agent"
  chmod +x "$STATE/agent"
  {
    echo "export ASTERIA_CLUSTER_DIR=$STATE ASTERIA_CLUSTER_PREFIX=$PREFIX"
    echo "export ASTERIA_CLUSTER_HOSTS='$(hosts | tr '\n' ' ' | sed 's/ $//')'"
    echo "export ASTERIA_CLUSTER_SUBNET=$subnet.0/24 ASTERIA_CLUSTER_NODE_TMP=$STATE/nodetmp"
    echo "export ASTERIA_CLUSTER_RATE='$rate' ASTERIA_CLUSTER_DELAY_MS='$delay'"
  } >"$STATE/env.sh"
  say "up: $n host(s) node1..node$n on $subnet.0/24${rate:+, egress $rate}${delay:+, delay ${delay} ms}"
}

status() {
  [[ -f $STATE/hosts ]] || { say "no cluster ($STATE)"; return 1; }
  local h ns
  for h in $(hosts); do
    ns=$(host_ns "$h")
    if ip netns list | grep -q "^$ns\b"; then
      printf '%-8s %-15s link %-5s %s\n' "$h" "$(host_ip "$h")" \
        "$(ip -n "$ns" -br link show eth0 2>/dev/null | awk '{print $2}')" \
        "$(ip netns exec "$ns" tc qdisc show dev eth0 2>/dev/null | grep -oE '(tbf|netem).*' | tr '\n' ' ')"
    else
      printf '%-8s missing (namespace %s)\n' "$h" "$ns"
    fi
  done
}

link() {
  need_root
  local h=${1:-} what=${2:-}
  known_host "$h" || die "no host '$h' in this cluster"
  local ns
  ns=$(host_ns "$h")
  case $what in
    down) ip -n "$ns" link set eth0 down ;;
    up) ip -n "$ns" link set eth0 up ;;
    loss)
      local pct=${3:-}
      [[ $pct =~ ^[0-9]+$ ]] && ((pct >= 0 && pct <= 100)) || die "loss needs a percentage, got '$pct'"
      ip netns exec "$ns" nft delete table inet asteria_loss 2>/dev/null || true
      ip netns exec "$ns" nft -f - <<EOF
table inet asteria_loss {
  chain out { type filter hook output priority 0; oifname "lo" accept; numgen random mod 100 < $pct counter drop; }
}
EOF
      ;;
    clear) ip netns exec "$ns" nft delete table inet asteria_loss 2>/dev/null || true ;;
    dropped)
      { ip netns exec "$ns" nft list table inet asteria_loss 2>/dev/null || true; } |
        grep -oE 'counter packets [0-9]+' | awk '{n += $3} END {print n + 0}'
      ;;
    *) die "link HOST down|up|loss PCT|clear|dropped" ;;
  esac
}

cmd=${1:-}
[[ -n $cmd ]] || usage
shift
case $cmd in
  up) up "$@" ;;
  down) down ;;
  status) status ;;
  run) (($# >= 2)) || die "run HOST CMD..."; in_host "$@" ;;
  agent)
    # Open MPI calls the agent as `agent [-x] HOST COMMAND...` (an ssh stand-in).
    while [[ ${1:-} == -* ]]; do shift; done
    h=${1:?agent HOST CMD}
    shift
    in_host "$h" /bin/sh -c "$*"
    ;;
  mpirun)
    [[ -f $STATE/env.sh ]] || die "no cluster: run 'cluster.sh up N' first"
    # shellcheck disable=SC1091
    source "$STATE/env.sh"
    # Over the cluster's links only; a lost host's daemon is noticed within about 40 s on an idle
    # connection (TCP keepalive) and 25-51 s after mpirun sends it something (tcp_retries2, set by
    # `up`; the longer when load stretches the retransmission timeout), so mpirun ends
    # instead of waiting on a host it cannot reach.
    # --bind-to none: every host's daemon would bind its ranks to the same cores of this one
    # machine.
    in_host node1 mpirun --bind-to none --mca plm_rsh_agent "$STATE/agent" --mca plm_rsh_no_tree_spawn 1 \
      --mca oob_tcp_if_include "$ASTERIA_CLUSTER_SUBNET" --mca btl_tcp_if_include "$ASTERIA_CLUSTER_SUBNET" \
      --mca oob_tcp_keepalive_time 10 --mca oob_tcp_keepalive_intvl 5 --mca oob_tcp_keepalive_probes 6 \
      -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM "$@"
    ;;
  link) link "$@" ;;
  -h | --help | help) usage ;;
  *) die "unknown command '$cmd' (up, down, status, run, agent, mpirun, link)" ;;
esac
