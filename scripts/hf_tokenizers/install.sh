#!/usr/bin/env bash
# Installs Hugging Face's JavaScript tokenizers (the versions locked in package-lock.json) into
# scripts/hf_tokenizers/node_modules, and node/npm with apt-get when they are missing (a fresh
# Debian 12 has neither; its nodejs is 18.x, enough for encode.mjs).
#
# Usage: scripts/hf_tokenizers/install.sh
#
# Idempotent and fast when already done: nothing runs when node_modules holds every package of
# package-lock.json at its locked version (checked against node_modules/.package-lock.json, the
# record npm itself keeps, and the stamp this script writes after a successful `npm ci`).
# `npm ci --ignore-scripts`: no install script runs, so nothing is downloaded but the registry's
# tarballs; nothing at all is fetched when encode.mjs runs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"

apt_install() {
  if [[ $(id -u) -ne 0 ]]; then
    echo "install.sh: $* missing and not root: install it (apt-get install $*)" >&2
    exit 1
  fi
  if [[ -z ${ASTERIA_APT_UPDATED:-} ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    export ASTERIA_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v node >/dev/null || apt_install nodejs
command -v npm >/dev/null || apt_install npm

stamp=node_modules/.asteria-lock.sha256
lock_sum=$(sha256sum package-lock.json package.json | sha256sum | cut -d' ' -f1)

installed_ok() {
  [[ -f $stamp && "$(cat "$stamp")" == "$lock_sum" ]] || return 1
  # Every locked package present at its locked version.
  node -e '
    const fs = require("fs");
    const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8")).packages;
    for (const [path, meta] of Object.entries(lock)) {
      if (!path) continue;
      let v;
      try { v = JSON.parse(fs.readFileSync(path + "/package.json", "utf8")).version; }
      catch { process.exit(1); }
      if (v !== meta.version) process.exit(1);
    }' 2>/dev/null
}

if installed_ok; then
  echo "install.sh: node_modules up to date ($(node --version), locked packages present)"
  exit 0
fi

echo "install.sh: npm ci --ignore-scripts in $here (node $(node --version), npm $(npm --version))"
rm -f "$stamp"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
echo "$lock_sum" >"$stamp"
installed_ok || { echo "install.sh: node_modules does not match package-lock.json after npm ci" >&2; exit 1; }
echo "install.sh: done"
