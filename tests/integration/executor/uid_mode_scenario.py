"""The ``uid`` fallback's workers, run for real (``python -m tests.integration.executor.uid_mode_scenario
OUT.json``): started by test_worker_uid_mode.py in a private mount namespace where the interpreter is
reachable by other users, with ``REGRAPH_JAIL=off`` (no namespace jail: the executor is root, so the
workers fall back to ``uid``).

A victim evaluation's reference worker writes its expected outputs (what a candidate worker compares
against) and stores its task's timing sets; then an inline task's reference, in a reference worker of
its own, tries to overwrite those outputs, to plant a file in the victim worker's directory, to poison
the victim's stored timing set and to signal the victim's worker. Writes what happened to OUT.json.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

from executor.reference import build_reference
from executor.sandbox import WorkerProcess, finish_reference, start_reference, worker_protection
from executor.taskformat import parse_task
from tests.integration.executor.test_timingset_store_attack import POISON, SAXPY, reference_job, small_saxpy


def _attacker(victim_dir: Path, store_file: Path, victim_pid: int) -> str:
    expected = json.dumps(str(victim_dir / "expected"))
    planted = json.dumps(str(victim_dir / "planted-by-another-worker"))
    return f"""{POISON}
#include <csignal>
#include <dirent.h>
#include <string>
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
    if (DIR* d = opendir({expected})) {{
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.') poison((std::string({expected}) + "/" + e->d_name).c_str());
        closedir(d);
    }}
    poison({json.dumps(str(store_file))});
    if (std::FILE* f = std::fopen({planted}, "w")) {{ std::fputs("planted", f); std::fclose(f); }}
    kill({victim_pid}, SIGSTOP);
    {SAXPY}
}}
"""


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name not in ("stderr", "progress")
    }


def main(out: Path) -> None:
    logging.basicConfig(level=logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="regraph-uid-mode-"))
    work.chmod(0o755)
    victim = small_saxpy()
    cache = work / "cache"
    library = build_reference(victim, cache)
    report: dict[str, object] = {"protection": worker_protection("none", "reference")}
    victim_worker = WorkerProcess("reference", "none")
    try:
        job = reference_job(victim, library, cache / "timing-sets")
        start_reference(victim_worker, job, None)
        outcome = finish_reference(victim_worker, timeout_s=120)
        assert outcome.ok, outcome.message
        assert job.timing_set is not None
        store_file = Path(job.timing_set.dir) / "expected-y.npy"
        before = _digests(victim_worker.dir), hashlib.sha256(store_file.read_bytes()).hexdigest()
        # A live process of the victim's uid for the attacker to signal: a worker spare's.
        spare = WorkerProcess("reference", "none")
        try:
            inline = parse_task(
                {
                    **victim.model_dump(mode="json"),
                    "id": f"inline_{uuid.uuid4().hex[:6]}",
                    "reference_source": _attacker(victim_worker.dir, store_file, spare.pid),
                }
            )
            attacker_library = build_reference(inline, cache)
            attacker = WorkerProcess("reference", "none")
            try:
                start_reference(
                    attacker, reference_job(inline, attacker_library, cache / "timing-sets"), None
                )
                attacked = finish_reference(attacker, timeout_s=120)
                report["attacker_ok"] = attacked.ok
                report["uids"] = [getattr(w, "uid", None) for w in (victim_worker, spare, attacker)]
                report["attacker_uid_seen"] = os.stat(attacker.dir).st_uid
            finally:
                attacker.close()
            with open(f"/proc/{spare.pid}/status") as status:
                report["spare_state"] = next(line for line in status if line.startswith("State:")).split()[1]
        finally:
            spare.close()
        after = _digests(victim_worker.dir), hashlib.sha256(store_file.read_bytes()).hexdigest()
        report["worker_dir_unchanged"] = after[0] == before[0]
        report["changed"] = sorted(k for k in after[0] if after[0].get(k) != before[0].get(k))
        report["store_unchanged"] = after[1] == before[1]
    finally:
        victim_worker.close()
        shutil.rmtree(work, ignore_errors=True)
    out.write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
