#!/usr/bin/env bash
# Prints the bits of a fixed set of runs: every step's loss and gradient norm, the eval losses,
# and a hash of every checkpoint file's contents (h5dump: datasets and attributes, not HDF5's
# object timestamps nor the wall-clock train.elapsed_s; every number to 17 digits: bit for bit). A change that must not change any
# result (a refactor) prints the same lines before and after:
#   scripts/bits_fingerprint.sh build > before.txt; ...; scripts/bits_fingerprint.sh build > after.txt; diff before.txt after.txt
# Runs: SOAP asteria (one rank; two replicas with coherence; two ranks fsdp full), AdamW native
# (one rank), and SOAP resumed at step 6 from the first run. Default threads throughout.
set -euo pipefail
command -v h5dump >/dev/null || { echo "bits_fingerprint: needs h5dump (Debian hdf5-tools; scripts/setup.sh installs it)" >&2; exit 1; }
cd "$(dirname "$0")/.."
build=${1:-build}
train="$PWD/$build/bin/asteria-train"
[[ -s data/generated/tok512/train.bin ]] || ASTERIA_BUILD_DIR=$build scripts/prepare_data.sh 512 >/dev/null
work=$(mktemp -d /tmp/asteria-bits.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun -np 2 --oversubscribe --bind-to none)
common=(--set train.steps=12 --set train.eval_every=6 --set train.warmup_steps=2 --set optim.precondition_frequency=3
        --set checkpoint.every=6 --set checkpoint.keep=5)
bits() {   # name, run dir: its steps' figures and its checkpoints' contents
  /usr/bin/python3 - "$2" "$1" <<'PY'
import hashlib, json, pathlib, subprocess, sys
def contents(path):
    # The dump without its first line (the path) and the train.elapsed_s dataset (wall-clock).
    lines, out, skip = subprocess.run(["h5dump", "-m", "%.17g", str(path)], check=True,
                                      capture_output=True, text=True).stdout.split("\n")[1:], [], None
    for line in lines:
        if skip is None and 'DATASET "train.elapsed_s"' in line:
            skip = line[:len(line) - len(line.lstrip())] + "}"
        elif skip is not None:
            if line == skip: skip = None
        else:
            out.append(line)
    return "\n".join(out).encode()
d, name = pathlib.Path(sys.argv[1]), sys.argv[2]
for line in open(d / "metrics.jsonl"):
    r = json.loads(line)
    print(name, "step", r["step"], "loss", repr(r["loss"]), "grad_norm", repr(r["grad_norm"]), "eval", repr(r.get("eval_loss")))
for m in sorted(d.glob("checkpoints/*/manifest.json")):
    for f in json.load(open(m))["files"]:
        dump = contents(m.parent / f["name"])
        print(name, m.parent.name, f["name"], hashlib.sha256(dump).hexdigest()[:16])
PY
}
run() {   # name, launcher..., -- args...
  local name=$1; shift
  local launch=()
  while [[ $1 != -- ]]; do launch+=("$1"); shift; done; shift
  "${launch[@]}" "$train" "$@" "${common[@]}" --set run.dir="$work/$name" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; echo "bits_fingerprint: run $name failed" >&2; exit 1; }
  bits "$name" "$work/$name"
}
run soap-1 env -- --config configs/tiny-soap.yaml --set runtime.mode=asteria
run soap-replicas "${mpi[@]}" -- --config configs/tiny-soap.yaml --set runtime.mode=asteria --set runtime.coherence.staleness=2
run soap-fsdp "${mpi[@]}" -- --config configs/tiny-soap.yaml --set runtime.mode=asteria --set distributed.fsdp=full
run adamw-1 env -- --config configs/tiny-adamw.yaml --set runtime.mode=native
# The first run resumed from its step-6 checkpoint: its lines must equal soap-1's.
cp -r "$work/soap-1" "$work/soap-resumed"
rm -rf "$work/soap-resumed/checkpoints/step00000012"
"$train" --config configs/tiny-soap.yaml --set runtime.mode=asteria "${common[@]}" --set run.dir="$work/soap-resumed" \
  --resume latest >"$work/resume.log" 2>&1 || { cat "$work/resume.log" >&2; exit 1; }
grep -q "resuming from .*step00000006" "$work/resume.log" || { cat "$work/resume.log" >&2; echo "bits_fingerprint: did not resume at step 6" >&2; exit 1; }
bits soap-resumed "$work/soap-resumed"
