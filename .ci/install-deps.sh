#!/usr/bin/env bash
# Installs what attnfuzz needs from Debian 12's packages (idempotent; run as root).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  libmpfr-dev libgmp-dev libboost-dev          # MPFR and Boost.Multiprecision oracles
  libgtest-dev libbenchmark-dev                # tests and benchmarks
  clang libclang-rt-14-dev                     # libFuzzer and sanitizers
  libcli11-dev nlohmann-json3-dev libfmt-dev   # CLI, JSON, formatting
  gnuplot-nox                                  # report plots (SVG)
  python3 python3-numpy                        # the Python kernel bridge (python/attnfuzz) and its tests
  libtorch-dev                                 # the libtorch plugin (kernels/torch) builds and its op-by-name path is tested
  chromium fonts-dejavu-core libxml2-utils     # headless-browser test of report.html; xmllint cross-check
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
