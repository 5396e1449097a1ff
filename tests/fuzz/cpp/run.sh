#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang) and runs each over its committed corpus for RUNS inputs
# (default 100000): a sanitizer report, a crash, a timeout (10 s) or an untyped error fails it. The
# harnesses print their outcome counts (inputs, typed errors) as they exit. Findings are written to
# build/fuzz/findings/. A longer run: tests/fuzz/cpp/run.sh 10000000
# TILEWISE_FUZZ_SEED: libFuzzer's -seed (default 0: a new random seed each run, to explore). The
# test suite passes a fixed one, so that a run on a clean clone is reproducible and a finding is
# the change's own; exploring with random seeds is what a local or nightly run is for.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
RUNS="${1:-100000}"
SEED="${TILEWISE_FUZZ_SEED:-0}"
BUILD="${TILEWISE_FUZZ_BUILD_DIR:-$ROOT/build/fuzz}"
CXX_FUZZ="${TILEWISE_FUZZ_CXX:-$(command -v clang++ || true)}"
if [[ -z "$CXX_FUZZ" ]]; then
  echo "fuzz: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2
  exit 1
fi
cmake -S "$ROOT/tests/fuzz/cpp" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_FUZZ" >/dev/null
cmake --build "$BUILD"
mkdir -p "$BUILD/findings"
status=0
for harness in tdl_desc op_attrs; do
  corpus="$BUILD/corpus/$harness"  # a working copy: the committed seeds stay as they are
  mkdir -p "$corpus"
  cp -n "$ROOT/tests/fuzz/cpp/corpus/$harness/"* "$corpus/" 2>/dev/null || true
  start=$SECONDS
  if ! "$BUILD/${harness}_fuzzer" -runs="$RUNS" -seed="$SEED" -max_len=512 -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
      -artifact_prefix="$BUILD/findings/${harness}-" "$corpus" 2> "$BUILD/${harness}.log"; then
    status=1
    tail -40 "$BUILD/${harness}.log"
  fi
  grep -E "^${harness}_fuzzer: " "$BUILD/${harness}.log" || true
  echo "   ${harness}_fuzzer: $RUNS runs (seed $SEED) in $((SECONDS - start)) s"
done
exit $status
