#!/usr/bin/env bash
# The poison-none control of cuDNN direct's forward failures on PyTorch's
# cuDNN 9.19 (issue 12): every saved `cudnn.sdpa` nan_inf / semantic case of
# the 9.19 forward runs (reports/backward/run*/cudnn919_fwd/corpus) is a
# ragged batch; re-run as saved (NaN in K/V padding) and with `poison none`
# (zeros there; a case saved with `poison inf` too).  If the padding reads of 9.14 are the cause on 9.19 too,
# the first fail and the second pass.  Results under $1 (default $OUT/control919).
# Needs attnfuzz at $AF (default /tmp/carry/attnfuzz).
set -u
R=${1:-$OUT/control919}
AF=${AF:-/tmp/carry/attnfuzz}
mkdir -p "$R/none"
export PATH=/opt/torch/.venv/bin:$PATH
ATTNFUZZ_CUDNN_LIB=$(python3 -c 'import nvidia.cudnn,os;print(os.path.join(list(nvidia.cudnn.__path__)[0],"lib","libcudnn.so.9"))')
export ATTNFUZZ_CUDNN_LIB
cases=()
for f in reports/backward/run*/cudnn919_fwd/corpus/cudnn.sdpa-{nan_inf,semantic_mismatch}-*.case; do
  [ -f "$f" ] || continue
  n=$(basename "$f")
  [ -f "$R/none/$n" ] && continue  # a signature saved by two runs: once
  cases+=("$f")
  sed 's/^poison .*$/poison none/' "$f" > "$R/none/$n"  # nan or inf: either is what padding reads turn into NaN
done
echo "cuDNN 9.19 control: ${#cases[@]} saved cases, cuDNN at $ATTNFUZZ_CUDNN_LIB"
$AF kernels 2>/dev/null | grep -A1 '^cudnn.sdpa ' | tail -1
timeout 120 $AF run --kernel cudnn.sdpa "${cases[@]}" > "$R/poison_nan.txt" 2>&1
echo "as saved (poison nan): rc=$? $(grep -c ': pass' "$R/poison_nan.txt") of ${#cases[@]} pass"
timeout 120 $AF run --kernel cudnn.sdpa "$R"/none/*.case > "$R/poison_none.txt" 2>&1
echo "poison none: rc=$? $(grep -c ': pass' "$R/poison_none.txt") of ${#cases[@]} pass"
