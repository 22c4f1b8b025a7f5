#!/usr/bin/env bash
# The demo as a new user meets it: a bare Debian bookworm root (debootstrap: the base system and
# nothing else), a fresh clone of this repository's committed HEAD in it, and scripts/demo.sh run
# there under chroot, timed from its start to its end (the demo's own installs, build, data,
# both trainings and samples). Packages come from deb.debian.org, the mirror debootstrap was
# given. Needs root. Writes bench/results/demo-fresh/summary.md (the time and the end of the
# demo's output); the whole output is kept in /var/tmp/asteria-demo-fresh.log.
#   bench/demo_fresh_machine.sh [WORK_DIR]   (default: a new directory under /var/tmp)
# Removes exactly what it made: its mounts (by path, in reverse order) and its directory.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
[[ $(id -u) -eq 0 ]] || { echo "demo_fresh_machine: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
command -v debootstrap > /dev/null || apt-get install -y -qq debootstrap > /dev/null
WORK=${1:-$(mktemp -d /var/tmp/asteria-demo-fresh.XXXXXX)}
ROOT=$WORK/root
OUT=bench/results/demo-fresh
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2> /dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "[demo-fresh] $*" >&2; }

log "debootstrap bookworm into $ROOT (not part of the demo's time)"
t0=$(date +%s)
debootstrap bookworm "$ROOT" http://deb.debian.org/debian > "$WORK/debootstrap.log" 2>&1 \
  || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
log "  $(( $(date +%s) - t0 )) s"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# The network's trust, as every machine of this kind has it: its extra CA certificates (an
# intercepting proxy's) and the bundle the environment names; the software is the root's own.
mkdir -p "$ROOT/usr/local/share/ca-certificates" "$ROOT/etc/ssl/certs"
cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2> /dev/null || true
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/"
trust=()
for v in SSL_CERT_FILE NODE_EXTRA_CA_CERTS; do [[ -n ${!v:-} ]] && trust+=("$v=${!v}"); done
for m in proc sys dev dev/pts; do
  case $m in
    proc) mount -t proc proc "$ROOT/proc" ;;
    sys) mount -t sysfs sys "$ROOT/sys" ;;
    dev) mount --bind /dev "$ROOT/dev" ;;
    dev/pts) mount -t devpts devpts "$ROOT/dev/pts" ;;
  esac
  mounted+=("$ROOT/$m")
done
git clone -q "$REPO" "$ROOT/asteria"
head=$(git -C "$ROOT/asteria" rev-parse --short HEAD)
installed_before=$(chroot "$ROOT" dpkg-query -W -f='${Package}\n' | wc -l)

log "scripts/demo.sh in the bare root (clone of $head)"
start=$(date +%s.%N)
set +e
chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "${trust[@]}" \
  bash -c 'cd /asteria && scripts/demo.sh' > "$WORK/demo.log" 2>&1
rc=$?
set -e
end=$(date +%s.%N)
wall=$(python3 -c "print(round($end - $start, 1))")
installed_after=$(chroot "$ROOT" dpkg-query -W -f='${Package}\n' | wc -l)
mkdir -p "$OUT"
cp "$WORK/demo.log" /var/tmp/asteria-demo-fresh.log
cpu=$(lscpu | sed -n 's/^Model name: *//p')
{
  echo "# The demo on a bare machine"
  echo
  echo "\`bench/demo_fresh_machine.sh\` on $(date -u +%Y-%m-%d): Debian bookworm from debootstrap ($installed_before"
  echo "packages), a fresh clone of $head, \`scripts/demo.sh\` under chroot; $(nproc) cores ($cpu)."
  echo
  echo "| exit | wall time, the whole demo | packages it installed | the demo's own split |"
  echo "|---|---|---|---|"
  echo "| $rc | $wall s ($(python3 -c "print(f'{$wall / 60:.1f}')") min) | $((installed_after - installed_before)) | $(grep '^demo: took' "$WORK/demo.log" | sed 's/^demo: took //') |"
  echo
  echo "What the demo printed at its end:"
  echo
  echo '```'
  if ((rc == 0)); then
    sed -n '/^eval loss against wall-clock/,$p' "$WORK/demo.log" | grep -v '^step ' | head -80
  else
    tail -30 "$WORK/demo.log"
  fi
  echo '```'
} > "$OUT/summary.md"
log "demo exit $rc, $wall s; wrote $OUT/summary.md"
exit $rc
