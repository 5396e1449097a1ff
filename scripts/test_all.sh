#!/usr/bin/env bash
# Every test of tilewise, against what users get:
#   1. pip install '.[test]'  (a normal, non-editable install: the wheel's extension and layout)
#   2. the GoogleTest suite, built with CMake in build/cpp and run by CTest
#   3. pytest on tests/python, run from tests/ so that the source python/ and tdl_ops/ folders
#      cannot shadow the installed packages (checked before pytest starts)
# Exits non-zero if the install fails or any test fails. Environment:
#   PYTHON                  interpreter to install into and test with (default: python, else python3)
#   TILEWISE_CPP_BUILD_DIR  CMake build folder for the C++ tests (default: build/cpp)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
CPP_BUILD="${TILEWISE_CPP_BUILD_DIR:-build/cpp}"
# The interpreter itself, not a shim: CMake must ask the same Python where scipy-openblas32 is.
PYTHON_EXE="$("$PYTHON" -c 'import sys; print(sys.executable)')"
failed=()

echo "== [1/3] pip install '.[test]' with $PYTHON_EXE"
"$PYTHON_EXE" -m pip install -q --disable-pip-version-check ".[test]"

echo "== [2/3] C++ tests: CMake + CTest in $CPP_BUILD"
if cmake -S . -B "$CPP_BUILD" -G Ninja -DTILEWISE_BUILD_TESTS=ON -DPython_EXECUTABLE="$PYTHON_EXE" \
  && cmake --build "$CPP_BUILD" \
  && ctest --test-dir "$CPP_BUILD" --output-on-failure --no-tests=error; then
  :
else
  failed+=("C++ (CTest)")
fi

echo "== [3/3] Python tests: pytest against the installed package"
cd "$ROOT/tests"
if ! "$PYTHON_EXE" - "$ROOT" <<'PY'
import pathlib
import sys

root = pathlib.Path(sys.argv[1]).resolve()
import tdl_ops  # noqa: E402
import tilewise  # noqa: E402
import tilewise._core  # noqa: E402

for module in (tilewise, tilewise._core, tdl_ops):
    path = pathlib.Path(module.__file__).resolve()
    for source in (root / "python", root / "tdl_ops"):
        if source == path.parent or source in path.parents:
            sys.exit(f"{module.__name__} was imported from the source tree ({path}), not the installed package")
    print(f"  {module.__name__}: {path}")
PY
then
  failed+=("installed-package check")
fi
# Exit status 5 (no tests collected) is a failure too: tests/python is never meant to be empty.
if ! "$PYTHON_EXE" -m pytest -q python; then
  failed+=("Python (pytest)")
fi

if ((${#failed[@]})); then
  echo "test_all.sh: FAILED: ${failed[*]}" >&2
  exit 1
fi
