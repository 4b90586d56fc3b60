"""`ExecutorEvaluator`: the search's `CandidateEvaluator` over the executor service, for one task.

How verdicts become `Evaluation`s:

* **passed** (correct on every input set and timed): ``passed=True``, ``speedup`` as measured by the
  executor (serial reference time / candidate time), reward `executor.protocol.reward_for`.
* **failed** (static rejection, compile error, crash, timeout, wrong or unwritten output...):
  ``passed=False``, reward -1, ``error_kind`` the executor's error kind.
* **not run** (the executor has no GPU runtime: static checks and compilation ran, correctness and
  timing did not): never a pass. The evaluator has two modes, see `VerificationMode`:

  - ``verified`` (the default): the executor cannot judge, so `EvaluatorUnavailableError` is raised
    and the search stops instead of scoring unverified code.
  - ``compile-only`` (chosen explicitly, e.g. when `executor_can_verify` says the executor has no GPU):
    the candidate is recorded with ``passed=False``, reward -1 and ``error_kind="not_verified"``,
    and its message says it compiled. No speedup is ever invented, so nothing can become the best
    code: a compile-only search only reports which candidates compile.

Failures of the executor itself (unreachable, an error answer, a broken task reference, a verdict that
passed without timing) raise `EvaluatorUnavailableError`: they say nothing about the candidate.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import ValidationError

from executor.client import ExecutorClient, ExecutorClientError, ExecutorUnreachableError
from executor.protocol import ErrorKind, EvaluationOptions, FunctionTask, KernelTask, Verdict, reward_for
from search.errors import EvaluatorUnavailableError
from search.protocols import Evaluation

logger = logging.getLogger(__name__)

VerificationMode = Literal["verified", "compile-only"]

NOT_VERIFIED = "not_verified"
"""`Evaluation.error_kind` of a candidate that compiled but could not be run (compile-only mode)."""

# Verdicts that are about the task or the executor, not about the candidate.
_INFRASTRUCTURE_ERRORS = frozenset({ErrorKind.REFERENCE_ERROR, ErrorKind.INTERNAL_ERROR})


def executor_can_verify(client: ExecutorClient) -> bool:
    """Whether the executor can run correctness and timing (it has a GPU runtime).

    Raises `EvaluatorUnavailableError` when the executor cannot be asked.
    """
    try:
        device = client.device()
    except ExecutorClientError as e:
        raise EvaluatorUnavailableError(f"the executor did not describe its device: {e}") from e
    return device.runtime_checks_available


def evaluation_from_verdict(verdict: Verdict, mode: VerificationMode) -> Evaluation:
    """Reduce an executor verdict to what the search needs (see the module docstring)."""
    raw = verdict.model_dump(mode="json")
    if verdict.error in _INFRASTRUCTURE_ERRORS:
        raise EvaluatorUnavailableError(
            f"the executor could not judge the candidate for task {verdict.task_id!r}: "
            f"{verdict.error.value if verdict.error else ''}: {verdict.message}"
        )
    if verdict.runtime_stages == "not_run" and verdict.error is ErrorKind.RUNTIME_NOT_AVAILABLE:
        if mode == "verified":
            raise EvaluatorUnavailableError(
                "the executor has no GPU runtime, so candidates cannot be checked or timed; point the "
                "search at a GPU executor, or run it in compile-only mode (nothing is then verified)"
            )
        return Evaluation(
            passed=False,
            reward=-1.0,
            error_kind=NOT_VERIFIED,
            message="compiled and passed the static checks; correctness and speed were not measured "
            "(compile-only executor, no GPU)",
            raw=raw,
        )
    if verdict.passed:
        if verdict.speedup is None:
            raise EvaluatorUnavailableError(
                f"the executor passed a candidate for {verdict.task_id!r} without timing it; the reward "
                "needs a measured speedup"
            )
        return Evaluation(
            passed=True,
            reward=reward_for(True, verdict.speedup),
            speedup=verdict.speedup,
            message=verdict.message,
            raw=raw,
        )
    return Evaluation(
        passed=False,
        reward=reward_for(False, None),
        error_kind=verdict.error.value if verdict.error is not None else "failed",
        message=verdict.message,
        raw=raw,
    )


class ExecutorEvaluator:
    """Evaluates candidates for one task on the executor service (implements `CandidateEvaluator`)."""

    def __init__(
        self,
        client: ExecutorClient,
        task: FunctionTask | KernelTask,
        *,
        mode: VerificationMode = "verified",
        options: EvaluationOptions | None = None,
    ) -> None:
        """Judge candidates for `task` through `client`; `mode` decides what a GPU-less verdict means."""
        self.client = client
        self.task = task
        self.mode: VerificationMode = mode
        self.options = options or EvaluationOptions()

    async def evaluate(self, code: str) -> Evaluation:
        """Send `code` to the executor and map its verdict; raises `EvaluatorUnavailableError`."""
        try:
            # Asked from the event loop, not from a thread: a cancelled search (a job cancelled, the
            # service stopping) closes the request at once instead of leaving a thread waiting for the
            # executor's answer (up to the client's limit).
            async with self.client.asynchronous() as client:
                verdict = await client.evaluate(self.task, code, self.options)
        except ExecutorUnreachableError as e:
            raise EvaluatorUnavailableError(f"the executor could not be reached: {e}") from e
        except ExecutorClientError as e:  # an error answer, or one that is not a verdict
            raise EvaluatorUnavailableError(f"the executor refused the evaluation: {e}") from e
        except ValidationError as e:  # the request itself (e.g. an empty source) could not be built
            raise EvaluatorUnavailableError(f"the candidate could not be sent to the executor: {e}") from e
        evaluation = evaluation_from_verdict(verdict, self.mode)
        logger.debug(
            "evaluated candidate",
            extra={"task": self.task.id, "passed": evaluation.passed, "error_kind": evaluation.error_kind},
        )
        return evaluation
