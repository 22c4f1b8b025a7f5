#!/usr/bin/env bash
# End-to-end smoke test of the JavaScript side of issue 53, in a temporary folder:
#   install.sh -> make_corpus.py -> make_bpe_tokenizers.py -> encode.mjs with each tokenizer,
# then checks (check_outputs.mjs) that every document of the corpus was encoded, that every id is
# in the vocabulary, and that decode(encode(x)) == x for every valid UTF-8 document (NFC(x) for
# the NeoX-style tokenizer, whose normalizer is NFC); that the raw (invalid UTF-8) files decode
# as Python's maximal-subpart decoder says (raw/expected.jsonl) and round-trip too; that the
# [a, b] merges form gives the same ids as the "a b" form; and that add_special_tokens appends
# <|endoftext|> with the TemplateProcessing file and adds nothing with the real files' shapes.
#
# Usage: scripts/hf_tokenizers/smoke.sh [--big-mb N] [--keep]
#   --big-mb N  size of the corpus's big document (default 10, as the issue asks)
#   --keep      keep the temporary folder (its path is printed)
# Prints each tokenizer's encode MB/s; ends with "N passed, N failed".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
gen=$repo/tests/data/tokenizer_corpus
big_mb=10
keep=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --big-mb) big_mb=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--big-mb N] [--keep]" >&2; exit 2 ;;
  esac
done

tmp=$(mktemp -d /tmp/hf_tokenizers_smoke.XXXXXX)
if [[ $keep -eq 0 ]]; then trap 'rm -rf "$tmp"' EXIT; else echo "smoke: keeping $tmp"; fi

"$here/install.sh"
python3 "$gen/make_corpus.py" "$tmp/corpus" --big-mb "$big_mb"
python3 "$gen/make_bpe_tokenizers.py" "$tmp/corpus" "$tmp/tok"
python3 "$gen/make_bpe_tokenizers.py" "$tmp/corpus" "$tmp/tok_pairs" --merges-format pairs

passed=0
failed=0
check() {  # NAME COMMAND...
  local name=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "ok   $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
  fi
}
vocab_size() {
  node -e 'const t = require(process.argv[1]); const ids = Object.values(t.model.vocab)
           .concat(t.added_tokens.map((a) => a.id)); console.log(Math.max(...ids) + 1)' "$1"
}
same_files() { cmp -s "$1" "$2"; }
first_ids() { head -n "$2" "$1" | tail -n 1; }

raw=("$tmp"/corpus/raw/*.bin)
for t in neox cl100k cl100k_eos; do
  tok=$tmp/tok/$t
  vs=$(vocab_size "$tok/tokenizer.json")
  nfc=()
  want=x
  if [[ $t == neox ]]; then nfc=(--nfc); want='NFC(x)'; fi
  node "$here/encode.mjs" "$tok" "$tmp/corpus/corpus.jsonl" "$tmp/$t.ids" --decode --write-input \
    2> >(tee "$tmp/$t.speed" >&2)
  check "$t: corpus encoded, ids in vocab, decode(encode(x)) == $want" \
    node "$here/check_outputs.mjs" "$tmp/$t.ids" "$vs" "${nfc[@]}" --titles "$tmp/corpus/corpus.jsonl"
  node "$here/encode.mjs" "$tok" "$tmp/$t.raw.ids" --decode --write-input --raw-files "${raw[@]}" \
    2>/dev/null
  check "$t: raw files decoded as expected.jsonl and round-trip" \
    node "$here/check_outputs.mjs" "$tmp/$t.raw.ids" "$vs" "${nfc[@]}" \
    --expect-input "$tmp/corpus/raw/expected.jsonl"
  node "$here/encode.mjs" "$tmp/tok_pairs/$t" "$tmp/corpus/corpus.jsonl" "$tmp/$t.pairs.ids" 2>/dev/null
  check "$t: [a, b] merges give the same ids as \"a b\" merges" same_files "$tmp/$t.ids" "$tmp/$t.pairs.ids"
  node "$here/encode.mjs" "$tok" "$tmp/corpus/corpus.jsonl" "$tmp/$t.special.ids" \
    --add-special-tokens 2>/dev/null
  if [[ $t == cl100k_eos ]]; then
    eos=$(node -e 'const t = require(process.argv[1]);
                   console.log(t.added_tokens.find((a) => a.content === "<|endoftext|>").id)' \
          "$tok/tokenizer.json")
    check "$t: --add-special-tokens appends <|endoftext|> ($eos) to every document" \
      node -e '
        const fs = require("fs");
        const a = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
        const b = fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(JSON.parse);
        const eos = Number(process.argv[3]);
        process.exit(a.length === b.length && a.every((x, i) =>
          JSON.stringify(x.concat([eos])) === JSON.stringify(b[i])) ? 0 : 1);' \
      "$tmp/$t.ids" "$tmp/$t.special.ids" "$eos"
  else
    check "$t: --add-special-tokens adds nothing (post_processor $(
             node -e 'console.log(require(process.argv[1]).post_processor?.type ?? "null")' \
             "$tok/tokenizer.json"))" same_files "$tmp/$t.ids" "$tmp/$t.special.ids"
  fi
done

echo "smoke: encode speed (JS, single thread, encode loop only):"
for t in neox cl100k cl100k_eos; do echo "  $t: $(tail -n 1 "$tmp/$t.speed" | sed 's/^encode.mjs: //')"; done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
