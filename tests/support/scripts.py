"""A Python script run in a fresh interpreter (a process of its own: what it does to its process, its
signals and its children, stays there), with this checkout importable; what it printed last, as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def script_answer(
    script: str, *args: str, cwd: Path, timeout_s: float = 120, unset: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Run ``python -c script args...`` in ``cwd`` with the checkout on ``PYTHONPATH`` and the
    variables named in ``unset`` removed from its environment; it must exit 0 (else its stderr's end is
    the failure); return its last line of output, parsed as a JSON object."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in unset:
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer
