#!/usr/bin/env bash
# asteria-train on two real hosts (scripts/cluster/cluster.sh: network namespaces with their own
# hostnames, addresses and links on one machine), each rank with its default threads:
#   1. hybrid sharding takes its nodes from the hosts (no distributed.ranks_per_node): the losses
#      equal, bit for bit, those of one host standing in for two nodes by the override;
#   2. coherence across the hosts (fsdp none): hierarchical shipping moves half of flat's bytes
#      between the hosts (2 replicas a host), with the same losses;
#   3. kill -9 of every rank of one host mid-run: the job ends within distributed.timeout_s + 30 s
#      naming the host, the newest checkpoint is intact, and resuming it on both hosts ends on the
#      losses of an uninterrupted run, bit for bit;
#   4. one host's link down mid-run: every rank ends within distributed.timeout_s + 30 s, the
#      message naming the collective and the hosts of its ranks, and mpirun once TCP gives up on
#      the unreachable host (within timeout_s + 60 s);
#   5. 30 % of one host's packets lost (nftables counts the drops, so the test knows the loss was
#      in the way): the run completes with the same losses. The stall it causes, comm_wait_s
#      against a clean run's, is printed, not asserted: it is a timing, and how long TCP takes to
#      resend what the output hook dropped varies with the machine's load (CI once saw no
#      difference over 6 steps, where this machine saw 7.0 s against 0.4 s).
# Needs root (network namespaces); exits 77 (skipped) without.
#   tests/cluster/multi_host_test.sh BUILD_BIN_DIR
set -euo pipefail
BIN=${1:?usage: multi_host_test.sh BUILD_BIN_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=$ROOT/scripts/cluster/cluster.sh
[[ $(id -u) -eq 0 ]] || { echo "multi_host_test: skipped: needs root for network namespaces"; exit 77; }
command -v ip >/dev/null && command -v nsenter >/dev/null || { echo "multi_host_test: skipped: needs iproute2 and util-linux"; exit 77; }

WORK=$(mktemp -d /tmp/asteria-multi-host.XXXXXX)
export ASTERIA_CLUSTER_DIR=$WORK/cluster ASTERIA_CLUSTER_PREFIX=at$(($$ % 100000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cleanup() {
  pkill -9 -f "$WORK/" 2>/dev/null || true
  "$CLUSTER" down >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "multi_host_test: FAIL: $*" >&2; exit 1; }
say() { echo "multi_host_test: $*"; }
T0=$SECONDS

"$CLUSTER" up 2 >/dev/null || fail "cluster up"
perl -e 'srand(3); my $t = 1; my @o; for (1 .. 40000) { if (rand() < 0.1) { $t = int(rand(512)) } else { $t = ($t * 7 + 3) % 512 } push @o, $t } print pack("v*", @o)' \
  >"$WORK/train.bin"
TRAIN=(--config "$ROOT/configs/tiny-soap.yaml" --set "data.train=$WORK/train.bin" --set data.eval= --set train.micro_batch=2
  --set train.warmup_steps=2 --set optim.precondition_frequency=3 --set runtime.mode=asteria --set distributed.check_every=1)
on_hosts() {  # RUN_DIR LOG ARGS...: 2 ranks on each of node1, node2
  local dir=$1 log=$2
  shift 2
  "$CLUSTER" mpirun --host node1:2,node2:2 "$BIN/asteria-train" "${TRAIN[@]}" --set "run.dir=$dir" "$@" >"$log" 2>&1
}
one_host() {  # RUN_DIR LOG ARGS...: 4 ranks here, nodes of 2 by the override
  local dir=$1 log=$2
  shift 2
  mpirun --oversubscribe -np 4 "$BIN/asteria-train" "${TRAIN[@]}" --set "run.dir=$dir" --set distributed.ranks_per_node=2 "$@" >"$log" 2>&1
}
losses() { grep -oE '"loss":[^,]*' "$1/metrics.jsonl" | cut -d: -f2 | tr '\n' ' '; }
sum_of() {  # RUN_DIR KEY: the sum over the steps
  /usr/bin/python3 -c "import json,sys; print(sum(json.loads(l).get(sys.argv[2], 0) for l in open(sys.argv[1] + '/metrics.jsonl')))" "$1" "$2"
}
step_of() { tail -n 1 "$1/metrics.jsonl" 2>/dev/null | grep -oE '"step":[0-9]+' | cut -d: -f2; }
ranks_alive() {  # RUN_DIR: whether an asteria-train of that run still lives, on any host
  local p
  for p in $(pgrep -x asteria-train); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "run.dir=$1 " && return 0
  done
  return 1
}
wait_step() {  # RUN_DIR STEP PID: until the run has written STEP (or its mpirun ended)
  local i
  for ((i = 0; i < 600; i++)); do
    [[ -n $(step_of "$1") ]] && (($(step_of "$1") >= $2)) && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}

# --- 1. hybrid from the hosts
on_hosts "$WORK/hybrid-hosts" "$WORK/hybrid-hosts.log" --set train.steps=8 --set distributed.fsdp=hybrid --set checkpoint.enabled=false ||
  fail "hybrid on two hosts: $(tail -5 "$WORK/hybrid-hosts.log")"
grep -q "note: distributed.ranks_per_node" "$WORK/hybrid-hosts.log" && fail "a run without the override printed the override's note"
one_host "$WORK/hybrid-one" "$WORK/hybrid-one.log" --set train.steps=8 --set distributed.fsdp=hybrid --set checkpoint.enabled=false ||
  fail "hybrid on one host: $(tail -5 "$WORK/hybrid-one.log")"
grep -q "note: distributed.ranks_per_node 2 makes 2 node(s) of 2 ranks in rank order, but the ranks run on 1 host" "$WORK/hybrid-one.log" ||
  fail "one host with the override: no note saying the override contradicts the hosts"
[[ $(losses "$WORK/hybrid-hosts") == "$(losses "$WORK/hybrid-one")" ]] ||
  fail "hybrid: two hosts gave $(losses "$WORK/hybrid-hosts"), one host with the override $(losses "$WORK/hybrid-one")"
say "1. hybrid from the hosts = one host with the override, bit for bit ($((SECONDS - T0)) s)"

# --- 2. coherence across the hosts, hierarchical vs flat
for h in true false; do
  on_hosts "$WORK/coh-$h" "$WORK/coh-$h.log" --set train.steps=10 --set distributed.fsdp=none --set checkpoint.enabled=false \
    --set "runtime.coherence.hierarchical=$h" || fail "coherence (hierarchical $h): $(tail -5 "$WORK/coh-$h.log")"
done
[[ $(losses "$WORK/coh-true") == "$(losses "$WORK/coh-false")" ]] || fail "hierarchical and flat coherence differ"
hier=$(sum_of "$WORK/coh-true" coherence_bytes_inter) flat=$(sum_of "$WORK/coh-false" coherence_bytes_inter)
/usr/bin/python3 -c "import sys; h, f = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if f > 0 and 2 * h == f else 1)" "$hier" "$flat" ||
  fail "between the hosts hierarchical moved $hier bytes, flat $flat (expected half)"
say "2. coherence across hosts: hierarchical $hier bytes between them, flat $flat, same losses ($((SECONDS - T0)) s)"

# --- 3. kill -9 every rank of node2 mid-run; resume on both hosts
FAULT=(--set train.steps=14 --set distributed.fsdp=hybrid --set checkpoint.every=3 --set distributed.timeout_s=10)
on_hosts "$WORK/straight" "$WORK/straight.log" "${FAULT[@]}" || fail "uninterrupted run: $(tail -5 "$WORK/straight.log")"
on_hosts "$WORK/killed" "$WORK/killed.log" "${FAULT[@]}" &
job=$!
wait_step "$WORK/killed" 7 "$job" || fail "the run to be killed did not reach step 7: $(tail -5 "$WORK/killed.log")"
t=$SECONDS
for p in $(ip netns pids "$ASTERIA_CLUSTER_PREFIX-node2"); do
  [[ $(cat "/proc/$p/comm" 2>/dev/null) == asteria-train ]] && kill -9 "$p"
done
rc=0
wait "$job" || rc=$?
took=$((SECONDS - t))
((rc != 0)) || fail "the job whose host died exited 0"
((took <= 10 + 30)) || fail "the job took $took s to end after node2's ranks were killed (bound: timeout_s + 30 = 40 s)"
grep -q "on node node2 exited on signal 9" "$WORK/killed.log" || fail "the message does not name node2: $(tail -8 "$WORK/killed.log")"
newest=$(ls -d "$WORK/killed/checkpoints/step"* | tail -n 1)
[[ -f $newest/manifest.json ]] || fail "the newest checkpoint $newest has no manifest"
on_hosts "$WORK/killed" "$WORK/resumed.log" "${FAULT[@]}" --resume latest || fail "resume: $(tail -5 "$WORK/resumed.log")"
[[ $(losses "$WORK/killed") == "$(losses "$WORK/straight")" ]] ||
  fail "killed and resumed: $(losses "$WORK/killed"); uninterrupted: $(losses "$WORK/straight")"
say "3. node2's ranks killed: the job ended in $took s naming node2; resumed from $(basename "$newest") = uninterrupted, bit for bit ($((SECONDS - T0)) s)"

# --- 4. node2's link down mid-run
on_hosts "$WORK/linkdown" "$WORK/linkdown.log" --set train.steps=400 --set distributed.fsdp=hybrid --set checkpoint.enabled=false \
  --set distributed.timeout_s=10 &
job=$!
wait_step "$WORK/linkdown" 3 "$job" || fail "the link-down run did not reach step 3: $(tail -5 "$WORK/linkdown.log")"
t=$SECONDS
"$CLUSTER" link node2 down
ranks_took=""
while kill -0 "$job" 2>/dev/null; do   # the ranks on both hosts (one machine: pgrep sees them all)
  [[ -z $ranks_took ]] && ! ranks_alive "$WORK/linkdown" && ranks_took=$((SECONDS - t))
  sleep 0.2
done
rc=0
wait "$job" || rc=$?
took=$((SECONDS - t))
"$CLUSTER" link node2 up
((rc != 0)) || fail "the job whose host lost its link exited 0"
ranks_took=${ranks_took:-$took}
# Asteria's bound: every rank, on either side of the dead link, ends within timeout_s + 10 s.
((ranks_took <= 10 + 30)) || fail "the ranks took $ranks_took s to end after node2's link went down (bound: timeout_s + 30 = 40 s)"
# mpirun's own end waits for TCP to give up on the unreachable host's daemon: tcp_retries2 6 is
# 25.4 s from the kill order at the shortest retransmission timeout and up to twice that when load
# stretches the timeout (docs/multi-node.md), so the launcher's bound is timeout_s + 60 s.
((took <= 10 + 60)) || fail "mpirun took $took s to end after node2's link went down (bound: timeout_s + 60 = 70 s)"
grep -qE "rank 0: .* did not complete within distributed.timeout_s = 10 s: a rank of .*node2.* died, stalled or lost its link" \
  "$WORK/linkdown.log" || fail "no message naming the collective and node2: $(grep -v '^step' "$WORK/linkdown.log" | head -8)"
say "4. node2's link down: the ranks ended in $ranks_took s, mpirun in $took s: $(grep -m1 -oE 'rank 0: .* lost its link' "$WORK/linkdown.log") ($((SECONDS - T0)) s)"

# --- 5. 30 % of node2's packets lost
LOSSY=(--set train.steps=6 --set distributed.fsdp=hybrid --set checkpoint.enabled=false --set distributed.timeout_s=120)
on_hosts "$WORK/clean" "$WORK/clean.log" "${LOSSY[@]}" || fail "clean run: $(tail -5 "$WORK/clean.log")"
"$CLUSTER" link node2 loss 30
if ! on_hosts "$WORK/lossy" "$WORK/lossy.log" "${LOSSY[@]}"; then
  # mpirun keeps one TCP link to each host's daemon; under 30 % loss on a loaded machine Open MPI's
  # launcher can give up on it ("HNP daemon ... Remote daemon ... on node node2") while the job's
  # ranks are fine. That is the launcher's channel, not Asteria's: one retry, said in the output;
  # any other failure fails the test.
  grep -q 'HNP daemon' "$WORK/lossy.log" || fail "the run with 30 % loss failed: $(tail -8 "$WORK/lossy.log")"
  say "5. mpirun's own link to node2's daemon gave up under 30 % loss (Open MPI's launcher, not the job): one retry"
  on_hosts "$WORK/lossy" "$WORK/lossy.log" "${LOSSY[@]}" --set run.overwrite=true || fail "the run with 30 % loss failed twice: $(tail -8 "$WORK/lossy.log")"
fi
dropped=$("$CLUSTER" link node2 dropped)
"$CLUSTER" link node2 clear
((dropped > 0)) || fail "30 % loss: no packet of node2's was dropped during the run (the loss was not in the way)"
[[ $(losses "$WORK/lossy") == "$(losses "$WORK/clean")" ]] || fail "30 % loss changed the losses"
clean_wait=$(sum_of "$WORK/clean" comm_wait_s) lossy_wait=$(sum_of "$WORK/lossy" comm_wait_s)
say "5. 30 % loss on node2: $dropped packets dropped, the run completed with the same losses; comm_wait_s $lossy_wait s vs $clean_wait s clean ($((SECONDS - T0)) s)"
say "passed ($((SECONDS - T0)) s)"
