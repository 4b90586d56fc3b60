"""A process that holds one of executor.gpulock's locks, for the lock tests (tests/unit/executor/
test_executor_gpulock.py, test_gpulock_compute_bound.py): :func:`start_holder` starts it.

Run as a script, ``lockholder.py LOCK SECONDS MARKER NAMED MODE RESOURCE`` holds, on the GPU lock's
path LOCK (given to gpulock as its LOCK_ENV), what gpulock's function NAMED holds (or, with NAMED
empty, the lock of RESOURCE in MODE) for SECONDS; it prints "asking" before it asks and "held" once it
holds, and with MARKER (empty: none) writes there [when it got the lock, the last thing done while
holding it]. It loads executor/gpulock.py (the standard library only) alone, not the package (numpy,
pydantic): it starts in a tenth of the time. So this module imports the standard library only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

GPULOCK = Path(__file__).resolve().parents[2] / "executor" / "gpulock.py"


def start_holder(
    lock: Path,
    seconds: float,
    marker: Path | None = None,
    *,
    named: str = "",
    mode: str = "exclusive",
    resource: str = "gpu",
    wait: bool = True,
) -> subprocess.Popen[str]:
    """A process that holds, on the GPU lock's path ``lock``, what the function of executor.gpulock
    called ``named`` holds (else the lock of ``resource`` in ``mode``) for ``seconds``; returned once
    it holds it (``wait``) or once it has started to ask for it. With ``marker``, it writes there when
    it got the lock and the last thing it did while holding it (:func:`held`)."""
    args = [str(lock), str(seconds), str(marker or ""), named, mode, resource]
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "asking"
    if wait:
        assert proc.stdout.readline().strip() == "held"
    return proc


def held(marker: Path) -> tuple[float, float]:
    """What a holder wrote to ``marker``: when it got the lock, and the last thing done while holding it."""
    got, last = json.loads(marker.read_text())
    return float(got), float(last)


def _gpulock() -> ModuleType:
    """executor/gpulock.py loaded alone, not as part of the package."""
    spec = importlib.util.spec_from_file_location("gpulock", GPULOCK)
    assert spec is not None and spec.loader is not None
    gpulock = importlib.util.module_from_spec(spec)
    sys.modules["gpulock"] = gpulock
    spec.loader.exec_module(gpulock)
    return gpulock


def _hold(lock: str, seconds: str, marker: str, named: str, mode: str, resource: str) -> None:
    gpulock = _gpulock()
    os.environ[gpulock.LOCK_ENV] = lock
    print("asking", flush=True)
    with getattr(gpulock, named)() if named else gpulock.gpu_lock(mode, resource):
        got = time.time()
        print("held", flush=True)
        time.sleep(float(seconds))
        if marker:
            Path(marker).write_text(json.dumps([got, time.time()]))


if __name__ == "__main__":
    _hold(*sys.argv[1:])
