#!/usr/bin/env bash
# Installs what Asteria needs from Debian's packages (only the missing ones), selects Debian's
# OpenMP build of OpenBLAS, and configures + builds into build/.
#   scripts/setup.sh            build dependencies, then cmake + build
#   scripts/setup.sh --demo     only what scripts/demo.sh runs: the packages its three programs
#                               and its plots need, and asteria-train, asteria-data and
#                               asteria-generate built into build-demo/ (no tests; the CUDA backend
#                               only where a GPU is visible)
#   ASTERIA_EXTRA_PACKAGES="python3-torch" scripts/setup.sh   also install extra packages
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=0
[[ ${1:-} == --demo ]] && DEMO=1

# slurm-wlm + munge: the local Slurm of the tests (scripts/slurm/local_slurm.sh); libpmix-dev
# holds the libpmix.so that Slurm's mpi/pmix plugin (srun --mpi=pmix) opens at run time.
# iproute2, nftables, util-linux: the hosts of scripts/cluster/cluster.sh (namespaces, shaped
# links, packet loss).
PACKAGES=(build-essential cmake pkg-config git
  libopenblas-openmp-dev liblapacke-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  libhdf5-dev hdf5-tools libxxhash-dev libgtest-dev libgmock-dev libsentencepiece-dev sentencepiece libpcre2-dev libutf8proc-dev libdnnl-dev libopenmpi-dev openmpi-bin
  slurm-wlm munge libpmix-dev iproute2 nftables util-linux
  python3-matplotlib python3-numpy bible-kjv ${ASTERIA_EXTRA_PACKAGES:-})

# The demo's subset: the libraries its programs link, the compiler, its plots and its corpus.
DEMO_PACKAGES=(build-essential cmake pkg-config
  libopenblas-openmp-dev liblapacke-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  libhdf5-dev libxxhash-dev libsentencepiece-dev libpcre2-dev libutf8proc-dev libdnnl-dev libopenmpi-dev openmpi-bin
  python3-matplotlib python3-numpy bible-kjv)
((DEMO)) && PACKAGES=("${DEMO_PACKAGES[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# One BLAS thread pool: OpenMP OpenBLAS shares libgomp with Asteria's own OpenMP loops, instead of
# a pthread pool and an OpenMP pool fighting over the same cores. Applied through Debian's
# alternatives so LAPACKE (and numpy/torch in the benchmarks) load the same library.
if [[ -d /usr/lib/x86_64-linux-gnu/openblas-openmp ]]; then
  while read -r name _ path; do
    [[ $path == *openblas-pthread* ]] || continue
    alt=${path/openblas-pthread/openblas-openmp}
    [[ -e $alt ]] && { [[ $(id -u) -eq 0 ]] && update-alternatives --quiet --set "$name" "$alt" || sudo update-alternatives --quiet --set "$name" "$alt"; }
  done < <(update-alternatives --get-selections | grep -E '^(libblas|liblapack|libopenblas|blas|lapack|openblas)')
fi

if ((DEMO)); then
  BUILD_DIR=${ASTERIA_BUILD_DIR:-build-demo}
  cuda=OFF
  nvidia-smi -L > /dev/null 2>&1 && cuda=AUTO
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DASTERIA_TESTS=OFF -DASTERIA_CUDA=$cuda >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target asteria-train asteria-data asteria-generate
else
  BUILD_DIR=${ASTERIA_BUILD_DIR:-build}
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi
