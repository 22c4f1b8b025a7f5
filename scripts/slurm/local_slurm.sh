#!/usr/bin/env bash
# A Slurm cluster on this machine from Debian's packages (slurm-wlm, munge), for tests and users:
# one node (this host) by default, or one node per host of a cluster of namespace hosts
# (scripts/cluster/cluster.sh) when ASTERIA_SLURM_CLUSTER names that cluster's state dir: then
# slurmctld runs on node1 and a slurmd on every host (its own NodeName and address), and Slurm's
# commands must run on a host (`cluster.sh run node1 sbatch ...`; env.sh says so).
#   scripts/slurm/local_slurm.sh start  [STATE_DIR]   start munged, slurmctld, slurmd(s); wait for the nodes
#                                                     (with only some slurmd gone: start those again)
#   scripts/slurm/local_slurm.sh stop   [STATE_DIR]   cancel its jobs, stop exactly the daemons it started
#   scripts/slurm/local_slurm.sh status [STATE_DIR]   the daemons, sinfo and squeue
# STATE_DIR (default $ASTERIA_SLURM_DIR, else /tmp/asteria-slurm-$UID) holds everything: the munge
# key and socket, slurm.conf, state, spool, logs, pid files and env.sh, which callers source
# (SLURM_CONF etc.). Runs as root, without systemd and without Slurm's cgroup plugins; nothing
# outside STATE_DIR is written but for one thing on request: ASTERIA_SLURM_NODE_MEMORY="HOST=BYTES
# ..." (at start) runs that host's slurmd, and so its jobs, in a memory cgroup of that limit
# (v2 where its memory controller is there, else v1; named after STATE_DIR, removed by stop), a
# node with less memory than the others. The node has nproc CPUs (ASTERIA_SLURM_CPUS overrides: more slots than cores); a
# job with more tasks than CPUs needs --overcommit (-O). Several STATE_DIRs can run side by side
# (each start picks free ports); start and stop of one STATE_DIR take turns (a lock file).
set -euo pipefail

usage() { echo "usage: $0 start|stop|status [STATE_DIR]" >&2; exit 2; }
(($# >= 1 && $# <= 2)) || usage
CMD=$1
STATE=${2:-${ASTERIA_SLURM_DIR:-/tmp/asteria-slurm-$(id -u)}}
ROOT_DIR=$(cd "$(dirname "$0")/../.." && pwd -P)
CLUSTER_SH=$ROOT_DIR/scripts/cluster/cluster.sh
# Nothing of a Slurm job this may run inside (or of another cluster) leaks into this cluster.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_|SQUEUE_)' || true)
START_TIMEOUT_S=${ASTERIA_SLURM_START_TIMEOUT:-60}

STARTING=0
die() {
  echo "local_slurm: error: $*" >&2
  # A failed start stops whatever it had started.
  if ((STARTING)); then STARTING=0; stop_daemons >/dev/null 2>&1 || true; remove_cgroups >/dev/null 2>&1 || true; fi
  exit 1
}
say() { echo "local_slurm: $*"; }

# The absolute path, without creating anything (stop/status must not create STATE_DIR).
abs_state() {
  if [[ -d $STATE ]]; then STATE=$(cd "$STATE" && pwd -P)
  elif [[ $STATE != /* ]]; then STATE=$PWD/$STATE; fi
  STATE=${STATE%/}
}

# The nodes: this host, or the hosts of the cluster named by ASTERIA_SLURM_CLUSTER (recorded in
# STATE_DIR/cluster at start, so that stop and status find it). Sets CLUSTER_DIR, HOSTS, ADDRS,
# DAEMONS (slurmd is slurmd-HOST on a cluster).
setup_nodes() {
  CLUSTER_DIR=${ASTERIA_SLURM_CLUSTER:-}
  [[ -z $CLUSTER_DIR && -f $STATE/cluster ]] && CLUSTER_DIR=$(<"$STATE/cluster")
  HOSTS=() ADDRS=()
  if [[ -n $CLUSTER_DIR ]]; then
    [[ -f $CLUSTER_DIR/hosts ]] || die "ASTERIA_SLURM_CLUSTER=$CLUSTER_DIR holds no cluster (scripts/cluster/cluster.sh up N)"
    local h a
    while read -r h a; do HOSTS+=("$h"); ADDRS+=("$a"); done <"$CLUSTER_DIR/hosts"
    export ASTERIA_CLUSTER_DIR=$CLUSTER_DIR
    DAEMONS=(munged slurmctld)
    for h in "${HOSTS[@]}"; do DAEMONS+=("slurmd-$h"); done
  else
    HOSTS=("$(hostname -s)") ADDRS=(127.0.0.1)
    DAEMONS=(munged slurmctld slurmd)
  fi
}
slurmd_name() { if [[ -n $CLUSTER_DIR ]]; then echo "slurmd-$1"; else echo slurmd; fi; }

# Runs a Slurm client command where slurmctld is reachable: here, or on node1 of the cluster.
client() {
  if [[ -n $CLUSTER_DIR ]]; then "$CLUSTER_SH" run "${HOSTS[0]}" "$@"; else "$@"; fi
}
# The command prefix that runs a daemon on host H (nothing for this host).
on_host() { [[ -z $CLUSTER_DIR ]] || echo "$CLUSTER_SH run $1"; }

# A pid recorded in STATE_DIR/pids/NAME.pid, printed only when that process is alive (not a
# zombie) and is ours: its command line names this STATE_DIR (a pid reused by another process
# after a crash is never taken for ours).
live_pid() {
  local f=$STATE/pids/$1.pid pid st
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  st=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
  [[ -n $st && $st != Z && $st != X ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$STATE/" || return 1
  echo "$pid"
}

gone() {  # true once the process has exited (or is a zombie)
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
  [[ -z $st || $st == Z || $st == X ]]
}

slurm_env() { export SLURM_CONF=$STATE/slurm.conf; }

log_tails() {  # the end of each daemon's log (its own log file, else what it wrote to stderr)
  local d f
  for d in "${DAEMONS[@]}"; do
    f=$STATE/log/$d.log
    [[ -s $f ]] || f=$STATE/log/$d.out
    [[ -s $f ]] || continue
    echo "----- tail of $f" >&2
    tail -n 15 "$f" >&2
  done
}

# Stops the daemons recorded in STATE_DIR (slurmd, slurmctld, munged), each by its recorded pid:
# TERM, up to 20 s, then KILL. Jobs are cancelled first so that no slurmstepd outlives slurmd.
stop_daemons() {
  local name pid i any=0
  if live_pid slurmctld >/dev/null && [[ -f $STATE/slurm.conf ]]; then
    slurm_env
    local jobs
    jobs=$(client timeout 10 squeue -h -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
      say "cancelling jobs: $(echo $jobs)"
      # shellcheck disable=SC2086
      client timeout 10 scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 60; i++)); do
        [[ -z $(client timeout 5 squeue -h -o %i 2>/dev/null || true) ]] && break
        sleep 0.5
      done
    fi
  fi
  local order=()
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do order+=("${DAEMONS[i]}"); done
  for name in "${order[@]}"; do
    if pid=$(live_pid "$name"); then
      any=1
      kill -TERM "$pid" 2>/dev/null || true
      for ((i = 0; i < 200; i++)); do gone "$pid" && break; sleep 0.1; done
      if ! gone "$pid"; then
        say "$name (pid $pid) ignored TERM for 20 s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 50; i++)); do gone "$pid" && break; sleep 0.1; done
      fi
      say "stopped $name (pid $pid)"
    fi
    rm -f "$STATE/pids/$name.pid"
  done
  return $((1 - any))
}

# Free TCP ports below the kernel's ephemeral range, none listening or bound now.
pick_ports() {
  local used p n=0 tries=0
  local hex
  used=" "
  for hex in $(awk 'FNR > 1 { n = split($2, a, ":"); print a[n] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
    used+="$((16#$hex)) "
  done
  PORTS=()
  while ((n < 2 && tries < 1000)); do
    tries=$((tries + 1))
    p=$((12000 + RANDOM % 18000))
    [[ $used == *" $p "* || " ${PORTS[*]:-} " == *" $p "* ]] && continue
    PORTS+=("$p"); n=$((n + 1))
  done
  ((n == 2)) || die "no free TCP ports found"
}

write_conf() {
  local cpus mem_kb mem_mb topo="" tmpfs=$STATE/tmp
  # On a cluster each host's scratch is its own (cluster.sh: nodetmp): Slurm's PMIx plugin makes
  # per-step directories there that two nodes must not share.
  [[ -n $CLUSTER_DIR ]] && tmpfs=$CLUSTER_DIR/nodetmp
  cpus=${ASTERIA_SLURM_CPUS:-$(nproc)}
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "ASTERIA_SLURM_CPUS must be a positive integer, not '$cpus'"
  mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  mem_mb=$((mem_kb / 1024 * 95 / 100))  # a bit below, so the node is never drained for memory
  # The topology slurmd sees, when it agrees with nproc (else CPUs alone; config_overrides below).
  local hw
  hw=$(slurmd -C 2>/dev/null | head -n 1 || true)
  if [[ $hw =~ CPUs=([0-9]+) ]] && ((BASH_REMATCH[1] == cpus)); then
    topo=$(grep -oE '(Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' <<<"$hw" | tr '\n' ' ')
  fi
  pick_ports
  # Job ids from a random start: under srun --mpi=pmix, Open MPI names its shared-memory files
  # (/dev/shm/vader_segment.HOST.*) and session directories after a hash of the PMIx namespace
  # slurm.pmix.JOBID.STEP, so two clusters on this host whose MPI jobs had the same id would
  # share them (both jobs crash in the vader BTL).
  local first_job=$(((RANDOM * 32768 + RANDOM) % 60000000 + 1000))
  cat >"$STATE/slurm.conf.tmp" <<EOF
# Written by scripts/slurm/local_slurm.sh start; rewritten (new ports) at every start.
ClusterName=asteria-local
FirstJobId=$first_job
SlurmctldHost=${HOSTS[0]}(${ADDRS[0]})
SlurmctldPort=${PORTS[0]}
SlurmdPort=${PORTS[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket.2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$tmpfs
# No cgroups (no systemd): processes are tracked through /proc, tasks are not bound.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MailProg=/bin/true
MpiDefault=pmix
SchedulerType=sched/backfill
# Batch jobs are scheduled at submit time (the default delays them up to 3 s).
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
InactiveLimit=0
KillWait=5
Waittime=0
MinJobAge=300
$(for i in "${!HOSTS[@]}"; do
    echo "NodeName=${HOSTS[i]} NodeAddr=${ADDRS[i]} NodeHostname=${HOSTS[i]} CPUs=$cpus ${topo}RealMemory=$mem_mb State=UNKNOWN"
  done)
# OverSubscribe=FORCE:4: up to 4 jobs share a core; one job with more tasks than CPUs needs
# sbatch/srun --overcommit (-O).
PartitionName=debug Nodes=$(IFS=,; echo "${HOSTS[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  mv "$STATE/slurm.conf.tmp" "$STATE/slurm.conf"
}

# Starts a daemon in a session of its own (it outlives the caller's terminal and ctest), output
# appended to STATE_DIR/log/NAME.out, and records its pid. setsid and setpriv exec, so $! is the
# daemon itself; the daemon's own pid file, once written, is checked against it.
# A host's memory cgroup when ASTERIA_SLURM_NODE_MEMORY (recorded in STATE_DIR/node_memory at start)
# gives it a limit: created with it, its path recorded in STATE_DIR/cgroups; prints the path.
node_cgroup() {
  local host=$1 limit="" item name cg
  [[ -f $STATE/node_memory ]] || return 0
  for item in $(<"$STATE/node_memory"); do [[ ${item%%=*} == "$host" ]] && limit=${item#*=}; done
  [[ -n $limit ]] || return 0
  name=asteria-slurm-$(basename "$STATE")-$host
  if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cg=/sys/fs/cgroup/$name; mkdir -p "$cg" && echo "$limit" >"$cg/memory.max"
  elif [[ -d /sys/fs/cgroup/memory ]]; then
    cg=/sys/fs/cgroup/memory/$name; mkdir -p "$cg" && echo "$limit" >"$cg/memory.limit_in_bytes"
  else
    die "ASTERIA_SLURM_NODE_MEMORY: no cgroup memory controller here"
  fi || die "cannot make the memory cgroup $cg"
  grep -qxF "$cg" "$STATE/cgroups" 2>/dev/null || echo "$cg" >>"$STATE/cgroups"
  echo "$cg"
}

# A host's slurmd, in its memory cgroup when it has one.
launch_slurmd() {
  local host=$1 cg
  cg=$(node_cgroup "$host")
  if [[ -n $cg ]]; then
    # shellcheck disable=SC2046
    launch "$(slurmd_name "$host")" bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" \
      $(on_host "$host") slurmd -D -f "$STATE/slurm.conf" -N "$host"
  else
    # shellcheck disable=SC2046
    launch "$(slurmd_name "$host")" $(on_host "$host") slurmd -D -f "$STATE/slurm.conf" -N "$host"
  fi
}

# The memory cgroups this STATE_DIR made, once their processes are gone.
remove_cgroups() {
  [[ -f $STATE/cgroups ]] || return 0
  local cg i
  while read -r cg; do
    for ((i = 0; i < 50; i++)); do rmdir "$cg" 2>/dev/null && break; [[ -d $cg ]] || break; sleep 0.1; done
    [[ -d $cg ]] && say "could not remove the cgroup $cg (processes left in it?)"
  done <"$STATE/cgroups"
  rm -f "$STATE/cgroups"
}

launch() {
  local name=$1; shift
  setsid "$@" </dev/null >>"$STATE/log/$name.out" 2>&1 9>&- &
  local pid=$! i
  echo "$pid" >"$STATE/pids/$name.pid"
  # Until the exec, the child is a copy of this shell, whose command line live_pid rejects.
  for ((i = 0; i < 100; i++)); do
    live_pid "$name" >/dev/null && return 0
    gone "$pid" && return 0
    sleep 0.05
  done
}

check_own_pidfile() {  # NAME DAEMON_PIDFILE: the daemon's pid file must name the pid we recorded
  local name=$1 f=$2 rec
  rec=$(<"$STATE/pids/$name.pid")
  [[ -s $f ]] || return 0
  [[ $(<"$f") == "$rec" ]] || die "$name wrote pid $(<"$f") to $f, but we started pid $rec"
}

start_munged() {
  local m=$STATE/munge as_munge=(setpriv --reuid=munge --regid=munge --init-groups)
  # munged wants its directories owned by user munge and not writable by others; its key owned
  # by munge, mode 0600. STATE_DIR must be traversable by munge.
  mkdir -p "$m"
  chown munge:munge "$m"
  chmod 0755 "$m"
  "${as_munge[@]}" test -x "$m" ||
    die "user munge cannot reach $m (a directory above it is not world-searchable); use a STATE_DIR under /tmp"
  local sock=$m/munge.socket.2
  ((${#sock} < 100)) || die "the munge socket path $sock is too long for a Unix socket; use a shorter STATE_DIR"
  if [[ ! -s $m/munge.key ]]; then
    "${as_munge[@]}" mungekey --create --bits=1024 --keyfile="$m/munge.key" >/dev/null
  fi
  chown munge:munge "$m/munge.key"
  chmod 0600 "$m/munge.key"
  rm -f "$sock"  # a stale socket from a killed munged (its lock file is released with the process)
  launch munged "${as_munge[@]}" munged --foreground --socket="$sock" --key-file="$m/munge.key" \
    --pid-file="$m/munged.pid" --log-file="$m/munged.log" --seed-file="$m/munged.seed" --num-threads=4
  local i
  for ((i = 0; i < 100; i++)); do
    live_pid munged >/dev/null || { log_tails; die "munged exited at startup (log above)"; }
    if [[ -S $sock ]] && munge -n --socket="$sock" 2>/dev/null | unmunge --socket="$sock" >/dev/null 2>&1; then
      check_own_pidfile munged "$m/munged.pid"
      return 0
    fi
    sleep 0.1
  done
  log_tails; die "munged did not answer on $sock within 10 s"
}

# A first batch job, run to completion: the node takes jobs, and slurmctld's scheduler has made
# its first pass (a few seconds after startup), so the caller's first job starts at once.
probe_batch_job() {
  local left=$1 job state info i
  ((left > 5)) || left=5
  job=$(client timeout 10 sbatch --parsable -J local_slurm_probe -N "${#HOSTS[@]}" -n "${#HOSTS[@]}" -o /dev/null \
    -e /dev/null --chdir="$STATE/tmp" --wrap true 2>&1) || { log_tails; die "the probe job was refused: $job"; }
  [[ $job =~ ^[0-9]+$ ]] || { log_tails; die "sbatch of the probe job answered '$job'"; }
  for ((i = 0; i < left * 5; i++)); do
    state=$(client timeout 10 squeue -h -j "$job" -o %T 2>/dev/null || true)
    [[ -z $state ]] && break
    sleep 0.2
  done
  info=$(client timeout 10 scontrol -o show job "$job" 2>/dev/null || true)
  if [[ -n $state || $info != *JobState=COMPLETED* ]]; then
    log_tails
    die "the probe job $job did not complete within $left s (state: ${state:-$(grep -oE 'JobState=[A-Z_]+' <<<"$info")})"
  fi
}

# One start or stop of a STATE_DIR at a time (fd 9, closed in the daemons).
lock_state() {
  exec 9>"$STATE/.lock"
  flock -w 120 9 || die "another start/stop of $STATE holds $STATE/.lock"
}

# The nodes' state: the one word when all nodes agree ("idle"), else the first that is not idle.
node_state() {
  local states
  states=$(client timeout 10 sinfo -h -N -o %T 2>/dev/null | sort -u)
  if [[ -n $states && $(wc -l <<<"$states") -eq 1 ]]; then echo "$states"; else grep -v '^idle' <<<"$states" | head -n 1; fi
}

do_start() {
  [[ $(id -u) -eq 0 ]] || die "run as root (slurmd runs as root, munged as user munge)"
  local b
  for b in munged mungekey munge unmunge slurmctld slurmd sinfo squeue sbatch scontrol setpriv setsid flock; do
    command -v "$b" >/dev/null || die "$b not found: install slurm-wlm and munge (scripts/setup.sh does)"
  done
  id munge >/dev/null 2>&1 || die "user munge missing (the munge package creates it)"
  mkdir -p "$STATE"
  abs_state
  lock_state
  setup_nodes
  if [[ -n $CLUSTER_DIR ]]; then echo "$CLUSTER_DIR" >"$STATE/cluster"; else rm -f "$STATE/cluster"; fi

  local name alive=0
  for name in "${DAEMONS[@]}"; do live_pid "$name" >/dev/null && alive=$((alive + 1)); done
  if ((alive == ${#DAEMONS[@]})); then
    slurm_env
    if [[ $(node_state) =~ ^(idle|mixed|allocated) ]]; then
      say "already running from $STATE"
      return 0
    fi
  fi
  # A node's slurmd lost (a node failure, or a test's) while slurmctld and munged run: only that
  # slurmd starts again; the jobs, pending ones too, stay.
  if ((alive > 0)) && live_pid munged >/dev/null && live_pid slurmctld >/dev/null && [[ -f $STATE/slurm.conf ]]; then
    slurm_env
    local host restarted=()
    for host in "${HOSTS[@]}"; do
      live_pid "$(slurmd_name "$host")" >/dev/null && continue
      rm -f "$STATE/pids/$(slurmd_name "$host").pid" "$STATE/run/slurmd.$host.pid"
      # The node comes back as after a reboot: the steps it lost leave no sockets or PMIx
      # directories in its spool, nor files in its scratch (a requeued job reuses their names).
      find "$STATE/spool/$host" -mindepth 1 -maxdepth 1 ! -name 'cred_state*' ! -name 'hwloc_topo_whole.xml' \
        -exec rm -rf {} + 2>/dev/null || true
      [[ -n $CLUSTER_DIR ]] && find "$CLUSTER_DIR/local/$host" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null || true
      launch_slurmd "$host"
      restarted+=("$host")
    done
    say "started slurmd again on ${restarted[*]} (slurmctld and munged were running; jobs kept)"
    return 0
  fi
  if ((alive > 0)); then
    say "restarting: only part of the cluster in $STATE is healthy"
    stop_daemons || true
  fi
  # Stale records (daemons that died or pids reused by others) are dropped.
  rm -f "$STATE"/pids/*.pid "$STATE"/run/*.pid

  STARTING=1
  chmod 0755 "$STATE"
  mkdir -p "$STATE"/{ctld,spool,log,run,pids,tmp}
  local h
  for h in "${HOSTS[@]}"; do mkdir -p "$STATE/spool/$h"; done
  chmod 1777 "$STATE/tmp"
  local host
  start_munged
  write_conf
  cat >"$STATE/env.sh" <<EOF
# source this file to use the local Slurm started from $STATE
export SLURM_CONF=$STATE/slurm.conf
export ASTERIA_SLURM_DIR=$STATE
EOF
  if [[ -n $CLUSTER_DIR ]]; then
    cat >>"$STATE/env.sh" <<EOF
# Its nodes are the hosts of $CLUSTER_DIR: run Slurm's commands on one, e.g.
#   $CLUSTER_SH run ${HOSTS[0]} sbatch ...
export ASTERIA_CLUSTER_DIR=$CLUSTER_DIR
EOF
  fi
  slurm_env
  # shellcheck disable=SC2046  # on_host: a command prefix, or nothing
  launch slurmctld $(on_host "${HOSTS[0]}") slurmctld -D -f "$STATE/slurm.conf"
  if [[ -n ${ASTERIA_SLURM_NODE_MEMORY:-} ]]; then echo "$ASTERIA_SLURM_NODE_MEMORY" >"$STATE/node_memory"; else rm -f "$STATE/node_memory"; fi
  for host in "${HOSTS[@]}"; do launch_slurmd "$host"; done

  local t0=$SECONDS st=""
  while ((SECONDS - t0 < START_TIMEOUT_S)); do
    for name in "${DAEMONS[@]}"; do
      if ! live_pid "$name" >/dev/null; then
        log_tails
        die "$name exited at startup (logs above, in $STATE/log)"
      fi
    done
    st=$(node_state || true)
    if [[ $st == idle ]]; then
      probe_batch_job $((START_TIMEOUT_S - (SECONDS - t0)))
      check_own_pidfile slurmctld "$STATE/run/slurmctld.pid"
      for host in "${HOSTS[@]}"; do check_own_pidfile "$(slurmd_name "$host")" "$STATE/run/slurmd.$host.pid"; done
      say "started from $STATE (slurmctld port ${PORTS[0]}, slurmd port ${PORTS[1]}); node(s) ${HOSTS[*]} idle"
      say "use it with: source $STATE/env.sh"
      STARTING=0
      return 0
    fi
    # A node left down or drained by an earlier run of this STATE_DIR is resumed.
    if [[ $st =~ ^(down|drain|drained|draining) ]]; then
      for host in "${HOSTS[@]}"; do client timeout 10 scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true; done
    fi
    sleep 0.5
  done
  log_tails
  die "node(s) ${HOSTS[*]} not idle after ${START_TIMEOUT_S} s (state: ${st:-no answer}; logs above, in $STATE/log)"
}

do_stop() {
  abs_state
  setup_nodes
  [[ -d $STATE ]] || { say "nothing to stop: $STATE does not exist"; return 0; }
  lock_state
  if stop_daemons; then say "stopped the cluster of $STATE"; else say "not running from $STATE"; fi
  remove_cgroups
}

do_status() {
  abs_state
  setup_nodes
  local name pid running=0
  for name in "${DAEMONS[@]}"; do
    if pid=$(live_pid "$name"); then echo "$name: running (pid $pid)"; running=$((running + 1))
    else echo "$name: not running"; fi
  done
  if live_pid slurmctld >/dev/null; then
    slurm_env
    client timeout 10 sinfo || true
    client timeout 10 squeue || true
  fi
  ((running == ${#DAEMONS[@]}))
}

case $CMD in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
  *) usage ;;
esac
