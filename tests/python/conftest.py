"""Session setup for the Python tests."""

import os
import tempfile

# This machine's calibration profile (tilewise.calibration) is measured once per test session into
# a private folder, never into the user's cache; subprocesses (MPI ranks) inherit the folder.
os.environ.setdefault("TILEWISE_CACHE_DIR", tempfile.mkdtemp(prefix="tilewise-test-cache-"))
