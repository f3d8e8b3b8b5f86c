#!/usr/bin/env bash
# The whole test suite, as CI runs it (README's second command; .ci/run calls it):
# unit tests, the mutant gate, a short campaign over every CPU kernel, the
# replay of the committed corpora, and the libFuzzer targets for a fixed time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
out=${CI_OUT:-$build/ci}

.ci/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs"
mkdir -p "$out"

step() { printf '\n=== %s\n' "$*"; }
step "unit tests"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

step "mutant gates: every CPU forward and backward mutant must be killed"
"$build/attnfuzz" mutants --no-corpus --out "$out/mutants"
"$build/attnfuzz" mutants --pass bwd

step "the backward pass from the command line: run --pass both (a plugin's pair), repro of a saved bwd failure"
"$build/attnfuzz" --kernel-lib "$build/kernels/plugin_example/libattnfuzz_plugin_example.so" \
  run --kernel example.naive_fp32 --pass both tests/harness/run/cases/mha_fp32.case
rc=0; "$build/attnfuzz" repro tests/harness/run/cases/lse_log2_bwd.case || rc=$?
[ "$rc" -eq 1 ] || { echo "the backward mutant's saved failure should fail again (exit 1), got exit $rc"; exit 1; }

step "replay of the committed corpora against every built-in kernel"
"$build/attnfuzz" replay corpora/seeds corpora/mutants corpora/regressions --kernel all --out "$out/replay"

step "short campaign over every CPU kernel"
"$build/attnfuzz" fuzz --kernel all --time 60 --seed "${CI_SEED:-1}" --progress plain \
  --corpus "$out/corpus" --out "$out/campaign"

step "short backward campaign over every correct backward kernel (the reference and the example plugin's)"
# 'all' leaves the mutants out; a failure here is a defect of the harness or of a reference.
"$build/attnfuzz" --kernel-lib "$build/kernels/plugin_example/libattnfuzz_plugin_example.so" \
  fuzz --kernel all --pass bwd --cases "${CI_BWD_CASES:-150}" --seed "${CI_SEED:-1}" --progress plain \
  --corpus "$out/corpus-bwd" --out "$out/campaign-bwd"

step "a Python kernel under a campaign through the bridge (kernels/python)"
ATTNFUZZ_PYTHON=/usr/bin/python3 "$build/attnfuzz" \
  --kernel-lib "$build/kernels/python/libattnfuzz_python.so#attnfuzz.kernels.numpy_reference:kernel" \
  fuzz --kernel py.numpy.reference --time 10 --seed "${CI_SEED:-1}" --progress plain --out "$out/python"

step "libFuzzer targets (ASan + UBSan)"
.ci/fuzz-smoke.sh

step "all green"
