#!/usr/bin/env bash
# ctest docs.configuration: docs/configuration.md must be what the config schema generates
# (asteria-train --print-config-reference, src/config/config_reference.cpp).
#   scripts/check_config_reference.sh BUILD/bin/asteria-train [docs/configuration.md]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
train=${1:?usage: check_config_reference.sh PATH/TO/asteria-train [docs/configuration.md]}
doc=${2:-$here/docs/configuration.md}
generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
"$train" --print-config-reference > "$generated"
if ! diff -u "$doc" "$generated"; then
  echo
  echo "docs/configuration.md differs from the config schema's reference (diff above: - the file, + generated)."
  echo "Refresh it with:"
  echo "  $train --print-config-reference > $doc"
  exit 1
fi
echo "docs/configuration.md matches the config schema"
