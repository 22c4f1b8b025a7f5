#!/usr/bin/env bash
# Prepares a run on the GPU machine from this one. The GPU machine has the CUDA toolkit and a
# driver but none of Asteria's Debian dependencies and no package source, so the build happens
# here (build/, or ASTERIA_BUILD_DIR, with -DASTERIA_CUDA=ON: sm_90) and .device/ (gitignored)
# receives what runs there:
#   .device/bin/  test_cuda, test_core, bench_gemm_cuda, bench_model_cuda, asteria-train, asteria-data
#   .device/lib.tar.xz  the shared libraries they load that are not glibc's or CUDA's (OpenBLAS,
#                 HDF5, Open MPI, yaml-cpp, sentencepiece, xxhash, ... as ldd resolves them here),
#                 compressed: 74 MiB of them would not travel (the device tool carries 64 MiB)
# Then, with the device tool: run scripts/device_check.sh "$OUT" carrying .device (64 MiB at most).
#   scripts/device_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ASTERIA_BUILD_DIR:-build}
scripts/setup.sh >/dev/null   # packages, and the build (AUTO: with CUDA where nvcc is)
cmake -S . -B "$BUILD_DIR" -DASTERIA_CUDA=ON >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target test_cuda test_core bench_gemm_cuda bench_model_cuda asteria-train asteria-data
rm -rf .device
mkdir -p .device/bin .device/lib
bins=(test_cuda test_core bench_gemm_cuda bench_model_cuda asteria-train asteria-data)
for b in "${bins[@]}"; do cp "$BUILD_DIR/bin/$b" .device/bin/; done
# Libraries: everything ldd resolves except the C runtime (the GPU machine's glibc is newer) and
# CUDA's (the GPU machine's toolkit, matched to its driver).
for b in "${bins[@]}"; do ldd "$BUILD_DIR/bin/$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) continue ;;
      libcuda*|libcublas*|libcusolver*|libcusparse*|libnvJitLink*|libnccl*|libcudnn*) continue ;;
    esac
    cp -L "$path" ".device/lib/$name"
  done
strip --strip-unneeded .device/bin/* 2>/dev/null || true
tar -cJf .device/lib.tar.xz -C .device lib
rm -rf .device/lib
du -sh .device | awk '{print "device bundle: " $1 " in .device/ (the device tool carries 64 MiB at most)"}'
