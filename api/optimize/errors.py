"""The optimize service's errors, under the one service-error root (each face maps them by kind)."""

from __future__ import annotations

from api.errors import ServiceError, ServiceErrorKind


class OptimizeError(ServiceError):
    """Root of the optimize service's errors."""


class NotConfiguredError(OptimizeError):
    """A dependency the job needs (generator model, executor) is not configured."""

    kind, error_type = ServiceErrorKind.UNAVAILABLE, "not_configured"


class InvalidTaskError(OptimizeError):
    """The request's task or program cannot be used."""

    kind, error_type = ServiceErrorKind.UNPROCESSABLE, "invalid_task"


def no_such_job(job_id: str) -> str:
    # One wording for a missing job and someone else's: the answer must not tell them apart.
    return f"job {job_id!r} not found"


class TaskNotFoundError(OptimizeError):
    """`task_ref` names no task in the tasks directory."""

    kind = ServiceErrorKind.NOT_FOUND


class JobUnknownError(OptimizeError):
    """No job has this id."""

    kind = ServiceErrorKind.NOT_FOUND


class JobAlreadyFinishedError(OptimizeError):
    """The job already ended, so it cannot be cancelled."""

    kind = ServiceErrorKind.CONFLICT


class JobStorageError(OptimizeError):
    """The job store (Neo4j) failed."""

    kind = ServiceErrorKind.UNAVAILABLE


class TooManyJobsError(OptimizeError):
    """The submitting key already has as many jobs queued or running as it may."""

    kind = ServiceErrorKind.TOO_MANY

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message, retry_after_s=retry_after_s)
