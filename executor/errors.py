"""The executor's exception hierarchy: one root, one subclass per failure family.

Only *infrastructure* failures are exceptions. A candidate that fails static checks, does not compile,
crashes or computes the wrong answer is a normal outcome and is reported as a `Verdict`.
"""

from __future__ import annotations


class ExecutorError(Exception):
    """Root of every exception raised by the `executor` package."""


class TaskFormatError(ExecutorError):
    """A task (on disk or on the wire) does not follow `regraph.task/v1`."""


class ExpressionError(TaskFormatError):
    """A size/scalar expression is malformed, uses an unknown name or does not evaluate."""


class ToolchainError(ExecutorError):
    """A compiler (g++ or nvcc) is missing or unusable."""


class GpuQueryError(ExecutorError):
    """nvidia-smi is there but did not answer a query: it failed, hung past its limit or wrote
    something else than the fields asked for (see :mod:`executor.gpuquery`)."""


class ReferenceBuildError(ExecutorError):
    """The task's own reference.cpp / generator.cpp failed to compile."""


class ReferenceRunError(ExecutorError):
    """The task's reference could not be loaded or run."""


class WorkerError(ExecutorError):
    """The isolated worker process could not be started or talked to (not a candidate failure)."""


class ExecutorClientError(ExecutorError):
    """A call to the executor service gave no usable answer (root of what `executor.client` raises)."""


class ExecutorUnreachableError(ExecutorClientError):
    """The executor could not be reached or did not answer in time, after the client's retries."""


class ExecutorAnswerError(ExecutorClientError):
    """The executor answered with an error envelope, or with something that is not the expected model."""

    def __init__(self, status: int | None, kind: str, message: str) -> None:
        # status: the HTTP status, None when the answer broke off before one could be read.
        answered = f"executor answered {status}" if status is not None else "executor's answer broke off"
        super().__init__(f"{answered} {kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message


class EvaluationCancelled(Exception):
    """The caller of an evaluation went away (its connection closed, or its request ran out of time):
    the evaluation stopped where it was, its workers killed. Not an `ExecutorError`: nothing failed,
    and nobody waits for an answer."""


class EvaluationExpired(EvaluationCancelled):
    """The evaluation's deadline (its request's limit, counted from when the executor accepted the
    request) passed before it was run: dropped where it waited (a slot, a replica's queue, the GPU),
    nothing judged. Answered as a request past its limit is: 504 ``timeout``, a batch's item a
    ``batch_timeout`` verdict (not judged), to a caller that may still wait."""
