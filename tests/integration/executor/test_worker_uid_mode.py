"""The ``uid`` fallback (no namespaces, the executor root) run for real on this host (issue 27).

There each worker sees the host's files as they are, so the workers must not share a uid: a reference
worker (an inline task's reference is a caller's code) could otherwise rewrite another evaluation's
expected outputs in that worker's directory, or stop its process. On this host the interpreter lives
under a 0700 home, so a worker of another uid cannot start and the executor's probe falls back to
``none``. The test therefore runs the scenario (uid_mode_scenario.py) in a private mount namespace in
which that home is replaced by a 0755 tmpfs holding binds of what the interpreter needs (nothing else
changes), with ``REGRAPH_JAIL=off`` so that the workers start under ``uid``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from executor.jail import is_root, protection

PROJECT = Path(__file__).resolve().parents[3]


def _closed_home() -> tuple[Path, list[Path]] | None:
    """The one directory that keeps other users from the interpreter (not o+x), and its entries the
    interpreter needs; None when there is none (the uid fallback works here as it is)."""
    needed = {Path(p).resolve() for p in (sys.executable, sys.prefix, sys.base_prefix)}
    closed = {a for p in needed for a in p.parents if a != Path("/") and not a.stat().st_mode & 0o001}
    if not closed:
        return None
    if len(closed) != 1:
        pytest.skip(f"more than one closed directory above the interpreter: {sorted(closed)}")
    home = closed.pop()
    return home, sorted({home / p.relative_to(home).parts[0] for p in needed if home in p.parents})


@pytest.mark.skipif(not is_root() or protection() != "namespace", reason="needs root and mount namespaces")
def test_uid_mode_workers_have_uids_of_their_own(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    script = [f"cd {shlex.quote(str(PROJECT))}"]
    closed = _closed_home()
    if closed is not None:
        home, entries = closed
        for k, entry in enumerate(entries):
            keep = tmp_path / f"keep{k}"
            keep.mkdir()
            script.append(f"mount --bind {shlex.quote(str(entry))} {keep}")
        script.append(f"mount -t tmpfs -o mode=755 tmpfs {shlex.quote(str(home))}")
        for k, entry in enumerate(entries):
            script.append(f"mkdir -p {shlex.quote(str(entry))}")
            script.append(f"mount --bind {tmp_path / f'keep{k}'} {shlex.quote(str(entry))}")
    script.append(f"exec {shlex.quote(sys.executable)} -m tests.integration.executor.uid_mode_scenario {out}")
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    env = {**os.environ, "REGRAPH_JAIL": "off"}
    tmp_path.chmod(0o755)
    done = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "/bin/sh", "-ec", "\n".join(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["protection"] == "uid", report
    assert report["attacker_ok"], report
    uids = report["uids"]
    assert None not in uids and len(set(uids)) == 3, uids  # three live workers, three uids
    assert report["attacker_uid_seen"] == uids[2]
    assert report["worker_dir_unchanged"], report  # nothing rewritten or planted
    assert report["store_unchanged"], report
    assert report["spare_state"] != "T", report  # not stopped by the other worker's SIGSTOP
