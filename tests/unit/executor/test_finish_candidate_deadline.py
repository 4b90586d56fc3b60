"""finish_candidate's ``timeout_s`` bounds the wait for the worker's preparation and the run together
(review 41 L4): the run's wait had a ``timeout_s`` of its own after the preparation's, so a worker
slow to prepare could hold its evaluation up to twice ``timeout_s``. A real worker whose task's input
generator (its ``generator.cpp``, run in the worker while it prepares) sleeps on every timing-size set,
so that its preparation outlasts ``timeout_s``."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from executor.sandbox import WorkerProcess, finish_candidate, start_candidate
from executor.taskformat import load_task
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun
from tests.support.hostcode import FAST, build_host_candidates, timing_set_job

FIXTURE = Path(__file__).parent / "fixtures" / "tasks" / "row_sums_csr"
SLEEP_S = 3  # each timing-size set's generation (at least three sets: 9 s of preparation)
TIMEOUT_S = 4.0


def test_a_worker_slow_to_prepare_is_given_timeout_s_in_all(tmp_path: Path) -> None:
    directory = tmp_path / "row_sums_csr"
    shutil.copytree(FIXTURE, directory)
    generator = directory / "generator.cpp"
    generator.write_text(
        "#include <unistd.h>\n"
        + generator.read_text().replace(
            "(void)values; (void)sums;", f"(void)values; (void)sums; if (rows > 1000) sleep({SLEEP_S});"
        )
    )
    task = load_task(directory)
    job = timing_set_job(task, tmp_path / "job", FAST)
    product = build_host_candidates(tmp_path, {"honest": (directory / "reference.cpp").read_text()})["honest"]
    proc = WorkerProcess("candidate", "host")
    try:
        start_candidate(proc, job, None)
        began = time.monotonic()
        outcome = finish_candidate(
            proc, CandidateRun(candidate_product=product, candidate_symbol=task.entry), TIMEOUT_S, None
        )
        took = time.monotonic() - began
    finally:
        proc.close()
    assert outcome.error is ErrorKind.TIMEOUT, outcome.message
    # one deadline: about TIMEOUT_S (twice it before), with room for the kill on a loaded machine
    assert took < 1.5 * TIMEOUT_S, took
