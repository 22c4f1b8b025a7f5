#!/usr/bin/env bash
# Builds Asteria (installing missing Debian packages) and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's PyTorch: the reference of the Hugging Face checks (tests/integration/hf_torch_reference.py).
ASTERIA_EXTRA_PACKAGES="python3-torch ${ASTERIA_EXTRA_PACKAGES:-}" scripts/setup.sh
# Multi-rank tests run mpirun; CI and developers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${ASTERIA_BUILD_DIR:-build}" --output-on-failure -j2 "$@"
