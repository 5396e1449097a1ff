#!/usr/bin/env bash
# The CUDA backend on a lent GPU machine, in one command (docs/CUDA.md): builds tilewise there with
# that machine's own Python (3.12, torch and the nvidia cuBLAS/cuDNN/NCCL wheels preinstalled; no
# network), then runs the CUDA test suites, writing results and timings under $OUT:
#   $OUT/build.log          the build
#   $OUT/info.txt           tilewise info (CUDA runtime, driver, cuBLAS, cuDNN, NCCL, devices)
#   $OUT/ctest.log          the C++ CUDA tests (tilewise_cuda_tests)
#   $OUT/pytest.log, $OUT/junit.xml   tests/python/test_cuda*.py (GPU tests skip without a device)
#   $OUT/gpu_profile.json   tilewise calibrate --gpu (the cluster "this-gpu"; cache in $OUT/cache)
#   $OUT/bench_cuda.json, $OUT/bench.log   benchmarks/bench_cuda.py: steps against torch, a swapped run
#   $OUT/timings.txt        seconds per phase
# Phases: `bash scripts/gpu_check.sh [build,pytest,calibrate,bench,cpp]` (default: all, in that order,
# the most telling first: a lent machine's time is short, and what a phase wrote under $OUT comes back
# even when a later one is cut off; build is needed once per machine, the others use what it installed).
# pytest runs the files that need a GPU (the host-only CUDA tests run in CI); each phase has a timeout,
# so that build + pytest + calibrate (--quick; GPU_CHECK_QUICK=0 for the full suite) + bench fit one
# 600 s device call on a machine where nothing was built yet.
# The GPU machine lacks scipy-openblas32: bring its wheel along in shared/wheels/ (see
# /work/.library/device/README.md); it is installed from there with --no-index.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3.12}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
PHASES=",${1:-build,pytest,calibrate,bench,cpp},"
want() { [[ "$PHASES" == *",$1,"* ]]; }
export TILEWISE_CACHE_DIR="$OUT/cache"
t0=$SECONDS
phase() { echo "$1 $((SECONDS - t0)) s" >> "$OUT/timings.txt"; t0=$SECONDS; }
: > "$OUT/timings.txt"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$OUT/nvidia-smi.txt"

if want build; then
if ls shared/wheels/scipy_openblas32-*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --find-links shared/wheels scipy-openblas32 >> "$OUT/build.log" 2>&1
fi
"$PY" -m pip install -q --no-build-isolation --no-deps \
  -Ccmake.define.TILEWISE_WITH_CUDA=ON -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
  -Ccmake.define.TILEWISE_CUDA_PYTHON="$(command -v "$PY")" . >> "$OUT/build.log" 2>&1
build_rc=$?
phase "build(pip-install)"
echo "build rc=$build_rc" >> "$OUT/timings.txt"
fi

(cd /tmp && "$PY" -c "import sys, tilewise.cli; sys.argv = ['tilewise', 'info']; tilewise.cli.main()") > "$OUT/info.txt" 2>&1

if want pytest; then
(cd tests && timeout 180 "$PY" -m pytest -q -p no:cacheprovider -rsx --junitxml="$OUT/junit.xml" --durations=15 \
  python/test_cuda_gpu.py python/test_cuda_calibration.py python/test_cuda_build.py) > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/timings.txt"
phase "pytest"
tail -5 "$OUT/pytest.log"
fi

if want calibrate; then
(cd /tmp && timeout 150 "$PY" -c "import sys, tilewise.cli; sys.exit(tilewise.cli.main(['calibrate', '--gpu', '--force', '--json'] + (['--quick'] if '${GPU_CHECK_QUICK:-1}' == '1' else [])))") \
  > "$OUT/gpu_profile.json" 2> "$OUT/calibrate.log"
echo "calibrate rc=$?" >> "$OUT/timings.txt"
phase "calibrate"
fi

if want bench; then
timeout 240 "$PY" benchmarks/bench_cuda.py --out "$OUT" --runs 5 --time-limit 10 > "$OUT/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/timings.txt"
phase "bench"
cat "$OUT/bench.log"
fi
if want cpp; then
cmake -S . -B build/gpu-cpp -G Ninja -DTILEWISE_BUILD_TESTS=ON -DTILEWISE_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v "$PY")" > "$OUT/ctest.log" 2>&1 &&
  cmake --build build/gpu-cpp -j16 --target tilewise_cuda_tests >> "$OUT/ctest.log" 2>&1 &&
  timeout 120 ./build/gpu-cpp/tilewise_cuda_tests >> "$OUT/ctest.log" 2>&1
echo "ctest rc=$?" >> "$OUT/timings.txt"
phase "cpp-tests"
fi
cat "$OUT/timings.txt"
