"""One cache of candidate builds for the whole test run, for the executor tests that do not examine
building.

Every executor a test starts has its own cache directory (its timing sets, baselines, references and
builds), and each built the same few candidates (a spinning saxpy, a correct one) again: ~2-3 s of
nvcc each on the CI machine. :func:`sharing_builds` makes a test's ``<cache_dir>/candidates`` (where
:class:`executor.compile.Compiler` keeps its builds) a link to one directory of the run, shared by
every xdist worker; the rest of the cache stays the test's own. The compiler's cache is safe to
share between threads and processes: a product and its record are each moved into place by an
atomic rename (the record last), so a reader sees a whole build or none, and two tests that build
one key at once (one in each worker) each write the same product. (The compiler's lock that makes a
second request wait for a build under way is per executor cache, beside ``candidates``: each test's
own.)

Tests that examine building (compile seconds, cache hits, prewarm, fair slots' compile tests, compile
cores, attack tests) keep their own caches: their builds must happen in them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def shared_builds_dir(factory: pytest.TempPathFactory) -> Path:
    """The run's directory of shared builds: beside the xdist workers' temporary directories (each
    worker's base directory is one of the run's), or in this process's when xdist is off."""
    base = factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    shared = root / "shared-candidate-builds"
    shared.mkdir(parents=True, exist_ok=True)
    return shared


def sharing_builds(cache_dir: Path, shared: Path) -> Path:
    """``cache_dir`` (created), its candidates' builds kept in ``shared``; returns ``cache_dir``."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / "candidates").symlink_to(shared, target_is_directory=True)
    return cache_dir
