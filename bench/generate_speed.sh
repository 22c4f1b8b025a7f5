#!/usr/bin/env bash
# Generation speed of asteria-generate on this CPU, with the key/value cache and without it (every
# token recomputes the whole sequence: the baseline), greedy, --ignore-eos, in the same run:
#   bench-small   a checkpoint of configs/bench-small-adamw.yaml after 20 steps on the demo's data
#                 (d 256, 4 layers, 4096 rows); prompt 16 tokens, 128 new (context 256)
#   OLMo-1B       the synthetic bf16 folder of bench/hf_import.sh (allenai/OLMo-1B-hf's shapes);
#                 prompt 16 tokens, NEW new (default 32; context 64)
# Each case ROUNDS times (default 3), cache and no cache interleaved; the median tokens/s of each.
#   bench/generate_speed.sh [ROUNDS] [NEW]
# Raw output under runs/bench/generate-speed/; bench/results/generate-speed/summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
NEW=${2:-32}
OUT=${ASTERIA_BENCH_OUT:-bench/results/generate-speed}
RAW=${ASTERIA_BENCH_RAW:-runs/bench/generate-speed}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
mkdir -p "$OUT" "$RAW"
BIN=build/bin
small=$RAW/bench-small
if [[ ! -d $small/checkpoints ]]; then
  $BIN/asteria-train --config configs/bench-small-adamw.yaml --set run.dir="$small" --set run.overwrite=true \
    --set train.steps=20 --set train.warmup_steps=2 --set data.eval= > "$RAW/bench-small-train.txt" 2>&1
fi
ckpt=$(ls -d "$small"/checkpoints/step* | tail -1)
HF=${ASTERIA_HF_FOLDER:-runs/bench/hf-import/olmo-1b-bf16}
[[ -s $HF/model.safetensors ]] || /usr/bin/python3 bench/make_hf_folder.py "$HF" --dtype bf16 > /dev/null
prompt="11 22 33 44 55 66 77 88 99 111 222 333 444 555 666 777"

# tokens/s of one run; $1 the log name, the rest asteria-generate's arguments.
rate() {
  local log=$RAW/$1.txt
  shift
  $BIN/asteria-generate "$@" --ids "$prompt" --ignore-eos --backend cpu > "$log" 2>&1
  sed -n 's/.* = \([0-9.]*\) tokens\/s.*/\1/p' "$log"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A got
for r in $(seq "$ROUNDS"); do
  for cache in cache no-cache; do
    flag=(); [[ $cache == no-cache ]] && flag=(--no-cache)
    got[small-$cache]+=" $(rate "small-$cache-$r" --checkpoint "$ckpt" --max-new-tokens 128 "${flag[@]}")"
    got[olmo-$cache]+=" $(rate "olmo-$cache-$r" --hf "$HF" --max-new-tokens "$NEW" --context 64 "${flag[@]}")"
  done
done
{
  echo "# Generation speed: bench/generate_speed.sh $ROUNDS $NEW"
  echo
  echo '```'
  echo "cpu:  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p')"
  echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; BLAS kernels: $(/usr/bin/python3 -c "import ctypes; l=ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype=ctypes.c_char_p; print(l.openblas_get_corename().decode())")"
  echo "git: $(git rev-parse --short HEAD), $(date -u +%F); threads: all cores; greedy, --ignore-eos, prompt 16 tokens"
  echo '```'
  echo
  echo "| model | new tokens | key/value cache: tokens/s | no cache: tokens/s | cache / no cache |"
  echo "|---|---|---|---|---|"
  for m in small olmo; do
    c=$(median <<<"${got[$m-cache]}"); n=$(median <<<"${got[$m-no-cache]}")
    name=$([[ $m == small ]] && echo "bench-small (checkpoint)" || echo "OLMo-1B shape (bf16 folder, fp32 compute)")
    new=$([[ $m == small ]] && echo 128 || echo "$NEW")
    awk -v a="$c" -v b="$n" -v m="$name" -v k="$new" 'BEGIN {printf "| %s | %s | %.2f | %.2f | %.1fx |\n", m, k, a, b, a / b}'
  done
  echo
  echo "Each figure is the median of $ROUNDS runs, cache and no cache interleaved. The new tokens' time only"
  echo "(the prompt's pass is reported apart by the tool)."
  echo "Rounds, tokens/s: small cache${got[small-cache]}; small no cache${got[small-no-cache]}; olmo cache${got[olmo-cache]}; olmo no cache${got[olmo-no-cache]}."
} > "$OUT/summary.md"
cat "$OUT/summary.md"
