#!/usr/bin/env bash
# The layering of src/: a folder includes only from itself and the folders below it. The order,
# lowest first, is written here once (docs/architecture.md explains each):
#   core  comm  data  model  hf  optim  runtime  fsdp  config  train
# Exits non-zero naming every include that points up (ctest: layering.src).
set -euo pipefail
cd "$(dirname "$0")/../src"
order=(core comm data model hf optim runtime fsdp config train)
declare -A level
for i in "${!order[@]}"; do level[${order[$i]}]=$i; done
bad=0
while IFS= read -r file; do
  top=${file%%/*}
  [[ -n ${level[$top]+x} ]] || { echo "check_layers: src/$file: folder '$top' is not in the order (scripts/check_layers.sh)"; bad=1; continue; }
  while IFS=: read -r line inc; do
    dep=${inc#*\"}; dep=${dep%%/*}
    [[ -n ${level[$dep]+x} ]] || continue   # a library header
    if (( level[$dep] > level[$top] )); then
      echo "check_layers: src/$file:$line includes \"${inc#*\"} ($dep is above $top)"
      bad=1
    fi
  done < <(grep -n '^#include "' "$file" | sed 's/^\([0-9]*\):#include /\1:/')
done < <(find . -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) | sed 's|^\./||' | sort)
(( bad == 0 )) && echo "check_layers: every include in src/ points down (${order[*]})"
exit $bad
