#!/usr/bin/env bash
# Tokenizer speed on the demo corpus (data/generated/corpus/corpus.jsonl, scripts/prepare_data.sh):
# Asteria's encoders (asteria-data encode: parallel over documents, at its default threads and at
# one) against Hugging Face's JavaScript implementation (@huggingface/tokenizers in node,
# scripts/hf_tokenizers/encode.mjs, one thread) on the same text in the same run, for
#   sentencepiece: the demo's tokenizer (data/generated/tok4096/tokenizer.model), and in
#                  Hugging Face as the files asteria-data export-tokenizer writes for it;
#   byte-level BPE: a GPT-NeoX-shaped tokenizer.json (NFC, GPT-2's pattern, 3000 merges learned
#                  on the demo corpus by tests/data/tokenizer_corpus/make_bpe_tokenizers.py).
# Only the encode loops are timed (no file reading, parsing or writing). Both sides must agree:
# the ids are compared document by document.
#   bench/tokenize_speed.sh        writes bench/results/tokenize-speed/summary.md
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${ASTERIA_BENCH_OUT:-bench/results/tokenize-speed}
scripts/setup.sh >/dev/null
scripts/prepare_data.sh 4096 >/dev/null
scripts/hf_tokenizers/install.sh >/dev/null
work=$(mktemp -d /tmp/asteria-tokspeed.XXXXXX)
trap 'rm -rf "$work"' EXIT
corpus=data/generated/corpus/corpus.jsonl
mkdir -p "$OUT" "$work/corpus"
cp "$corpus" "$work/corpus/corpus.jsonl"
build/bin/asteria-data export-tokenizer --tokenizer data/generated/tok4096/tokenizer.model --out "$work/spm-hf" >/dev/null
python3 tests/data/tokenizer_corpus/make_bpe_tokenizers.py "$work/corpus" "$work/bpe" >/dev/null
threads=$(nproc)
mbs() { sed -n 's/^encoding: \([0-9.]*\) MB\/s.*/\1/p'; }
js_mbs() { sed -n 's/.* \([0-9.]*\) MB\/s$/\1/p' | tail -1; }
row() {   # name, asteria tokenizer, hf tokenizer
  local ours1 oursn js
  ours1=$(build/bin/asteria-data encode --corpus "$corpus" --tokenizer "$2" --output-dir "$work/out1" --threads 1 | mbs)
  oursn=$(build/bin/asteria-data encode --corpus "$corpus" --tokenizer "$2" --output-dir "$work/outn" --threads "$threads" | mbs)
  js=$(node scripts/hf_tokenizers/encode.mjs "$3" "$corpus" "$work/$1.ids" 2>&1 >/dev/null | js_mbs)
  # The same ids: Hugging Face's documents, EOS after each, in asteria's order (train then val).
  python3 - "$work/$1.ids" "$work/outn" <<'PY'
import json, sys, pathlib
docs = [json.loads(l) for l in open(sys.argv[1])]
meta = json.load(open(pathlib.Path(sys.argv[2]) / "data.json"))
every, eos = meta["val_every"], meta["eos_id"]
import array
def tokens(name):
    a = array.array("H" if meta["dtype"] == "uint16" else "I")
    a.frombytes((pathlib.Path(sys.argv[2]) / name).read_bytes())
    return list(a)
train = [t for i, d in enumerate(docs) if i % every != every - 1 for t in d + [eos]]
val = [t for i, d in enumerate(docs) if i % every == every - 1 for t in d + [eos]]
assert tokens("train.bin") == train and tokens("val.bin") == val, "asteria and Hugging Face differ"
PY
  printf '| %s | %s | %s | %s | %.2fx | %.2fx |\n' "$1" "$ours1" "$oursn" "$js" \
    "$(python3 -c "print($ours1 / $js)")" "$(python3 -c "print($oursn / $js)")"
}
{
  echo "# Tokenizer speed on the demo corpus (bench/tokenize_speed.sh, $(date -u +%F), $(git rev-parse --short HEAD))"
  echo
  echo "$(lscpu | awk -F': +' '/^Model name/ {print $2}'), $(nproc) cores; node $(node --version), @huggingface/tokenizers" \
       "$(node -p 'require("./scripts/hf_tokenizers/node_modules/@huggingface/tokenizers/package.json").version')"
  echo "corpus: $corpus, $(python3 -c "import json; print(sum(len(json.loads(l)['text'].encode()) for l in open('$corpus')))") bytes of text," \
       "$(wc -l < "$corpus") documents. MB/s of the encode loop alone; every document's ids identical on both sides."
  echo
  echo "| tokenizer | asteria, 1 thread MB/s | asteria, $threads threads MB/s | Hugging Face JS (1 thread) MB/s | asteria 1 thread vs JS | asteria $threads threads vs JS |"
  echo "|---|---|---|---|---|---|"
  row sentencepiece data/generated/tok4096/tokenizer.model "$work/spm-hf"
  row byte-level-bpe "$work/bpe/neox" "$work/bpe/neox"
} | tee "$OUT/summary.md"
