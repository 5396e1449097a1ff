#!/usr/bin/env bash
# The CUDA backend on a lent GPU machine, in one command (docs/CUDA.md): builds tilewise there with
# that machine's own Python (3.12, torch and the nvidia cuBLAS/cuDNN/NCCL wheels preinstalled; no
# network), then runs the CUDA test suites, writing results and timings under $OUT:
#   $OUT/build.log          the build
#   $OUT/info.txt           tilewise info (CUDA runtime, driver, cuBLAS, cuDNN, NCCL, devices)
#   $OUT/ctest.log          the C++ CUDA tests (tilewise_cuda_tests)
#   $OUT/pytest.log, $OUT/junit.xml   tests/python/test_cuda*.py (GPU tests skip without a device)
#   $OUT/timings.txt        seconds per phase
# The GPU machine lacks scipy-openblas32: bring its wheel along in shared/wheels/ (see
# /work/.library/device/README.md); it is installed from there with --no-index.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3.12}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
t0=$SECONDS
phase() { echo "$1 $((SECONDS - t0)) s" >> "$OUT/timings.txt"; t0=$SECONDS; }
: > "$OUT/timings.txt"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" > "$OUT/nvidia-smi.txt"

if ls shared/wheels/scipy_openblas32-*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --find-links shared/wheels scipy-openblas32 >> "$OUT/build.log" 2>&1
fi
"$PY" -m pip install -q --no-build-isolation --no-deps \
  -Ccmake.define.TILEWISE_WITH_CUDA=ON -Ccmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
  -Ccmake.define.TILEWISE_CUDA_PYTHON="$(command -v "$PY")" . >> "$OUT/build.log" 2>&1
build_rc=$?
phase "build(pip-install)"
echo "build rc=$build_rc" >> "$OUT/timings.txt"

(cd /tmp && "$PY" -c "import sys, tilewise.cli; sys.argv = ['tilewise', 'info']; tilewise.cli.main()") > "$OUT/info.txt" 2>&1
cmake -S . -B build/gpu-cpp -G Ninja -DTILEWISE_BUILD_TESTS=ON -DTILEWISE_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython_EXECUTABLE="$(command -v "$PY")" > "$OUT/ctest.log" 2>&1 &&
  cmake --build build/gpu-cpp -j8 --target tilewise_cuda_tests >> "$OUT/ctest.log" 2>&1 &&
  ./build/gpu-cpp/tilewise_cuda_tests >> "$OUT/ctest.log" 2>&1
echo "ctest rc=$?" >> "$OUT/timings.txt"
phase "cpp-tests"

(cd tests && "$PY" -m pytest -q -p no:cacheprovider -rsx --junitxml="$OUT/junit.xml" \
  python/test_cuda_build.py python/test_cuda_translate.py python/test_cuda_kernels.py python/test_cuda_models.py \
  python/test_cuda_gpu.py) > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/timings.txt"
phase "pytest"
tail -5 "$OUT/pytest.log"
cat "$OUT/timings.txt"
