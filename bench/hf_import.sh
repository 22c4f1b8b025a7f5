#!/usr/bin/env bash
# model.init_from at OLMo-1B's size: a synthetic Hugging Face folder of allenai/OLMo-1B-hf's exact
# shapes in bf16 (bench/make_hf_folder.py: 16 layers, d 2048, SwiGLU 8192, 50304 rows, tied; real
# weights cannot be fetched here), then
#   1. the disk: the file read with O_DIRECT (dd), the time an import is bounded by;
#   2. the import alone, cold and warm page cache (cold where the kernel lets this script drop its
#      caches): asteria-generate --hf with a one-position cache, which allocates the fp32
#      parameters and fills them from the file (hf/hf_weights.hpp), and nothing else of size:
#      its load time and peak RSS (VmHWM, /usr/bin/time) against the fp32 parameters' bytes;
#   3. the first STEPS steps of configs/olmo-1b-soap-continue.yaml from that folder, placed by
#      runtime.placement auto on this machine, as bench/olmo_1b_24g.sh runs the mission recipe
#      (train.micro_batch=1 train.grad_accum=1: one 2048-token instance per step; the recipe's
#      batch is 2048; data.train=data/generated/tok50280/train.bin, no eval, no checkpoint):
#      the import's time inside the run, each step's time and loss, the run's peak RSS.
#   bench/hf_import.sh [STEPS]      default 2; 0 skips the training run
# Raw runs under runs/bench/hf-import/ (gitignored); bench/results/hf-import/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-2}
OUT=${ASTERIA_BENCH_OUT:-bench/results/hf-import}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/hf-import}
scripts/setup.sh >/dev/null
mkdir -p "$OUT" "$RAW"
HF=$RAW/olmo-1b-bf16
[[ -s $HF/model.safetensors ]] || /usr/bin/python3 bench/make_hf_folder.py "$HF" --dtype bf16 > "$RAW/make.txt"
FILE=$HF/model.safetensors
bytes=$(stat -c %s "$FILE")
params=$(/usr/bin/python3 -c "import json; h=json.load(open('$HF/config.json')); C,F,V,L=h['hidden_size'],h['intermediate_size'],h['vocab_size'],h['num_hidden_layers']; print(V*C + L*(4*C*C + 3*F*C))")
fp32=$((params * 4))

drop_caches() { sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null; }
# VmHWM and the load line of one import; $1 labels it.
import_once() {
  /usr/bin/time -v build/bin/asteria-generate --hf "$HF" --ids 1 --max-new-tokens 1 --context 1 --backend cpu \
    > "$RAW/import-$1.out" 2> "$RAW/import-$1.err"
  local rss load
  rss=$(awk '/Maximum resident set size/ {print $6 * 1024}' "$RAW/import-$1.err")
  load=$(sed -n 's/.*parameters read in \([0-9.]*\) s.*/\1/p' "$RAW/import-$1.err")
  echo "$1 $load $rss"
}

dd_read=$(dd if="$FILE" of=/dev/null bs=64M iflag=direct 2>&1 | tail -1)
dd_s=$(awk '{for (i = 1; i <= NF; i++) if ($i == "s,") print $(i-1)}' <<<"$dd_read")
cold="(not measured: this machine does not let the script drop the page cache)"
if drop_caches; then cold=$(import_once cold); fi
import_once warm-1 > /dev/null   # the file in the page cache
warm=$(import_once warm)

{
  echo "# model.init_from at OLMo-1B's size: bench/hf_import.sh $STEPS"
  echo
  echo '```'
  echo "cpu:  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p')"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; MemTotal $(awk '/MemTotal/ {print $2}' /proc/meminfo) kB"
  echo "git: $(git rev-parse --short HEAD), $(date -u +%F)"
  echo "folder: $bytes bytes of BF16 ($params parameters; fp32: $fp32 bytes)"
  echo "dd (O_DIRECT) read of the file: $dd_read"
  echo '```'
  echo
  echo "## The import alone (asteria-generate --hf, a one-position cache)"
  echo
  echo "| page cache | parameters read s | against the O_DIRECT read | peak RSS | against the fp32 parameters |"
  echo "|---|---|---|---|---|"
  for row in "$cold" "$warm"; do
    read -r what load rss <<<"$row" || true
    [[ $what == cold || $what == warm ]] || { echo "| cold | $row | | | |"; continue; }
    awk -v w="$what" -v l="$load" -v r="$rss" -v d="$dd_s" -v f="$fp32" \
      'BEGIN {printf "| %s | %.2f | %.2fx | %.2f GiB | %.3fx |\n", w, l, l / d, r / 2^30, r / f}'
  done
  echo
  echo "Parameters read: from the memory map into the fp32 parameters, allocated before (what the"
  echo "trainer's startup line reports too). Peak RSS: the whole process (its libraries, about 0.2 GiB,"
  echo "included). Targets: a peak RSS of at most 1.1x the fp32 parameters plus what the run needs, and a"
  echo "time bounded by the disk's read."
} > "$OUT/summary.md"

if (( STEPS > 0 )); then
  scripts/prepare_data.sh 50280 >/dev/null
  sets=(--set model.init_from="$HF" --set data.train=data/generated/tok50280/train.bin --set data.eval=
        --set train.micro_batch=1 --set train.grad_accum=1 --set "train.stop_after=$STEPS" --set checkpoint.enabled=false
        --set "run.dir=$RAW/run" --set run.overwrite=true)
  /usr/bin/time -v build/bin/asteria-train --config configs/olmo-1b-soap-continue.yaml "${sets[@]}" \
    > "$RAW/run.out" 2> "$RAW/run.err" || { tail -20 "$RAW/run.err"; exit 1; }
  {
    echo
    echo "## The first $STEPS steps of configs/olmo-1b-soap-continue.yaml from the folder (runtime.placement auto)"
    echo
    echo '```'
    grep -E "parameters from|placement" "$RAW/run.err" | cut -c1-400
    echo "peak RSS: $(awk '/Maximum resident set size/ {printf "%.2f GiB", $6 / 2^20}' "$RAW/run.err")"
    echo '```'
    echo
    echo "| step | loss | step s | fwd s | bwd s | optim s |"
    echo "|---|---|---|---|---|---|"
    /usr/bin/python3 -c "
import json
for line in open('$RAW/run/metrics.jsonl'):
    r = json.loads(line)
    print(f\"| {r['step']} | {r['loss']:.4f} | {r['step_time_s']:.1f} | {r.get('fwd_s', 0):.1f} | {r.get('bwd_s', 0):.1f} | {r.get('optim_s', 0):.1f} |\")"
  } >> "$OUT/summary.md"
fi
cat "$OUT/summary.md"
