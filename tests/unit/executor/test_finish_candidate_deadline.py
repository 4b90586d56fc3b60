"""finish_candidate's ``timeout_s`` bounds the wait for the worker's preparation and the run together
(review 41 L4): the run's wait had a ``timeout_s`` of its own after the preparation's, so a worker
slow to prepare could hold its evaluation up to twice ``timeout_s``. A stand-in worker whose
preparation takes a known time; what the run's wait is then given."""

from __future__ import annotations

import time
from typing import Any, cast

from executor.sandbox import WorkerProcess, finish_candidate
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun

PREPARE_S = 0.4
TIMEOUT_S = 1.0


class SlowToPrepare:
    """What finish_candidate uses of a worker: one whose preparation takes ``prepare_s`` (past
    ``timeout_s``: never done in time), and whose run's wait is only recorded (killed: a timeout)."""

    runtime = "host"
    released_fault = None
    expired_call = None
    memory_limit_bytes = None

    def __init__(self, prepare_s: float) -> None:
        self.prepare_s = prepare_s
        self.waits: list[float] = []

    def wait_prepared(self, timeout_s: float, cancelled: Any = None) -> bool:
        time.sleep(min(self.prepare_s, timeout_s))
        return self.prepare_s <= timeout_s

    def hand_untrusted(self) -> None:
        pass

    def admit(self, run: CandidateRun) -> CandidateRun:
        return run

    def send(self, name: str, message: Any) -> None:
        pass

    def wait(self, timeout_s: float, *args: Any, **kwargs: Any) -> ErrorKind:
        self.waits.append(timeout_s)
        return ErrorKind.TIMEOUT

    def stage_text(self, default: str = "startup") -> str:
        return "inputs"

    def memory_exceeded(self) -> None:
        return None


def _finish(proc: SlowToPrepare) -> Any:
    run = CandidateRun(candidate_product="/nonexistent.so", candidate_symbol="saxpy")
    return finish_candidate(cast(WorkerProcess, proc), run, TIMEOUT_S, None)


def test_the_run_has_what_the_preparation_left_of_the_timeout() -> None:
    proc = SlowToPrepare(PREPARE_S)
    outcome = _finish(proc)
    assert outcome.error is ErrorKind.TIMEOUT
    [given] = proc.waits
    assert 0 < given <= TIMEOUT_S - PREPARE_S, given


def test_a_worker_never_prepared_is_given_no_run_time() -> None:
    proc = SlowToPrepare(TIMEOUT_S + 5)
    outcome = _finish(proc)
    assert proc.waits == [0.0]
    assert outcome.error is ErrorKind.TIMEOUT
    assert "during inputs" in outcome.message, outcome.message
