#!/usr/bin/env bash
# Asteria vs Hugging Face's OLMo / OLMo-2 code path on exported models: for OLMo and OLMo-2, tied
# and untied, padded (vocabulary 500 in 512 rows) and unpadded, the loss and the largest |logit|
# difference over every logit of every row of the LM head (fp32), and the same in fp64 (only
# rounding left). The reference is tests/integration/hf_torch_reference.py (transformers'
# modeling_olmo.py / modeling_olmo2.py forward and loss, in Debian's PyTorch); the cases are the
# export tests' (tests/integration/export_test.cpp), whose parity lines this collects.
#   bench/hf_parity.sh          -> bench/results/hf-parity/summary.md
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${ASTERIA_BENCH_OUT:-bench/results/hf-parity}
ASTERIA_EXTRA_PACKAGES="python3-torch ${ASTERIA_EXTRA_PACKAGES:-}" scripts/setup.sh >/dev/null
mkdir -p "$OUT"
log=$(build/bin/test_integration --gtest_filter='Export.*MatchesHf' 2>&1) || { echo "$log"; exit 1; }
{
  echo "# Asteria vs Hugging Face's OLMo classes on exported models: bench/hf_parity.sh"
  echo
  echo "git $(git rev-parse --short HEAD), $(date -u +%F), torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')."
  echo "A tiny model (d 64, 2 layers, 4 heads, 64 positions, weights std 0.15, norm weights 1 +- 0.5) with"
  echo "untrained padding rows, 3 sequences; HF's logits are every row its LM head has (config.json"
  echo "vocab_size = embedding_size); loss = HF's ForCausalLMLoss against Asteria's cross-entropy on the"
  echo "same tokens. fp32 columns: Asteria's fp32 model against transformers' float32 pass; fp64: both in"
  echo "float64."
  echo
  echo "| case | class | loss Asteria | loss HF | loss rel. diff | max abs logit diff (of max abs logit) | logit rel. diff | fp64 loss rel. diff | fp64 logit rel. diff | baseline: softmax over vocab_size rows, loss rel. diff |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  /usr/bin/python3 - "$log" <<'PY'
import re, sys
pat = re.compile(r"^parity (.*) (Olmo2?ForCausalLM): loss asteria (\S+) hf (\S+) \(relative (\S+)\); max \|logit\| "
                 r"difference (\S+) of (\S+) \(relative (\S+)\); fp64: loss relative (\S+), logits relative (\S+); "
                 r"softmax over vocab_size rows only: loss relative (\S+)$")
for line in sys.argv[1].splitlines():
    m = pat.match(line)
    if m:
        g = m.groups()
        print(f"| {g[0]} | {g[1]} | {g[2]} | {g[3]} | {g[4]} | {g[5]} (of {g[6]}) | {g[7]} | {g[8]} | {g[9]} | {g[10]} |")
PY
  echo
  echo "Targets: loss within 1e-5 relative, logits within fp32 rounding (asserted: 1e-5 of the largest);"
  echo "fp64 within 1e-10 (asserted). The last column is the baseline from the same run: the loss a head"
  echo "whose softmax covers the first vocab_size rows only (Asteria's before 2026-12-06) gives on the same"
  echo "logits, against HF's: 0.3-0.4 % with these 12 untrained padding rows in 512, as the issue found for"
  echo "exports of a model trained 50 steps under the old head (+0.35-0.49 %); 0 where nothing is padded."
} > "$OUT/summary.md"
cat "$OUT/summary.md"
