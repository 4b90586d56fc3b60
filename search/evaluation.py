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

import asyncio
import logging
from typing import Literal

from pydantic import ValidationError

from executor.client import (
    AsyncExecutorClient,
    ExecutorClient,
    ExecutorClientError,
    ExecutorUnreachableError,
)
from executor.protocol import (
    NOT_JUDGED,
    ErrorKind,
    EvaluationOptions,
    FunctionTask,
    KernelTask,
    Verdict,
    reward_for,
)
from search.errors import EvaluatorUnavailableError
from search.protocols import Evaluation

logger = logging.getLogger(__name__)

VerificationMode = Literal["verified", "compile-only"]

NOT_VERIFIED = "not_verified"
"""`Evaluation.error_kind` of a candidate that compiled but could not be run (compile-only mode)."""


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
    if verdict.error in NOT_JUDGED:  # about the task or the executor, not the candidate
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
    """Evaluates candidates for one task on the executor service (implements `CandidateEvaluator`).

    Its requests go through one connection pool (an `AsyncExecutorClient` of `client`'s address),
    opened by the first evaluation and kept until `aclose` (or the end of ``async with``): a search's
    evaluations reuse its connections instead of connecting anew each time. The pool belongs to the
    event loop of the evaluation that opened it; an evaluation on another loop opens its own.
    """

    def __init__(
        self,
        client: ExecutorClient,
        task: FunctionTask | KernelTask,
        *,
        mode: VerificationMode = "verified",
        options: EvaluationOptions | None = None,
        caller: str | None = None,
    ) -> None:
        """Judge candidates for `task` through `client`; `mode` decides what a GPU-less verdict means.

        `caller` (an API key's id: a job's owner) is sent with every evaluation, so the executor
        counts them against that key's share of its compile slots (`executor.fairslots`)."""
        self.client = client
        self.task = task
        self.mode: VerificationMode = mode
        self.options = options or EvaluationOptions()
        self.caller = caller
        self._pool: AsyncExecutorClient | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> ExecutorEvaluator:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool (the next evaluation opens a new one)."""
        pool, self._pool, self._pool_loop = self._pool, None, None
        if pool is not None:
            await pool.aclose()

    def _connections(self) -> AsyncExecutorClient:
        loop = asyncio.get_running_loop()
        if self._pool is None or self._pool_loop is not loop:  # connections cannot move between loops
            self._pool, self._pool_loop = self.client.asynchronous(), loop
        return self._pool

    async def evaluate(self, code: str) -> Evaluation:
        """Send `code` to the executor and map its verdict; raises `EvaluatorUnavailableError`."""
        try:
            # Asked from the event loop, not from a thread: a cancelled search (a job cancelled, the
            # service stopping) closes the request at once instead of leaving a thread waiting for the
            # executor's answer (up to the client's limit).
            verdict = await self._connections().evaluate(self.task, code, self.options, caller=self.caller)
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
