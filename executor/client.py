"""A small typed client of the executor's HTTP API.

It speaks :mod:`executor.protocol` and nothing else of the executor, so a caller needs neither the
evaluator nor a GPU. Whatever goes wrong on the way is raised as an `ExecutorClientError`: the
service unreachable (`ExecutorUnreachableError`, after retries) or an error answer, or an answer
that is not the expected model (`ExecutorAnswerError`). A candidate that fails is not an error: it
comes back as a `Verdict`.

`ExecutorClient` blocks its thread; `AsyncExecutorClient` is the same client for an event loop. Use
the async one in a server: an evaluation may wait minutes for its verdict, and cancelling the task
that awaits it closes the request at once, where a thread blocked in the sync client would keep
waiting for the answer (holding a worker of the loop's thread pool) until it came.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from executor.errors import ExecutorAnswerError, ExecutorClientError, ExecutorUnreachableError
from executor.protocol import (
    BatchRequest,
    BatchResponse,
    CandidateSource,
    ErrorEnvelope,
    EvaluateRequest,
    EvaluationOptions,
    FleetDeviceInfo,
    FunctionTask,
    KernelTask,
    PrepareRequest,
    PrepareResponse,
    Verdict,
)

__all__ = [
    "AsyncExecutorClient",
    "ExecutorAnswerError",
    "ExecutorClient",
    "ExecutorClientError",
    "ExecutorUnreachableError",
]

_Model = TypeVar("_Model", bound=BaseModel)

# Only transport failures (connection refused/reset, timeouts) are retried: an answer, even 5xx, is final.
_transport_retry = retry(
    retry=retry_if_exception_type(httpx.TransportError),
    stop=stop_after_attempt(4),
    wait=wait_exponential(multiplier=0.2, max=3.0),
    reraise=True,
)


def _unreachable(base_url: httpx.URL, e: httpx.TransportError) -> ExecutorUnreachableError:
    return ExecutorUnreachableError(f"the executor at {base_url} did not answer: {e}")


def _decoded(response: httpx.Response) -> Any:
    """The decoded JSON of a successful answer; an error answer as an `ExecutorAnswerError`."""
    if response.is_success:
        try:
            return response.json()
        except ValueError as e:
            raise ExecutorAnswerError(response.status_code, "unreadable", response.text[:500]) from e
    try:
        error = ErrorEnvelope.model_validate_json(response.content).error
    except ValidationError as e:
        raise ExecutorAnswerError(response.status_code, "unreadable", response.text[:500]) from e
    raise ExecutorAnswerError(response.status_code, error.type, error.message)


def _validated(model: type[_Model], data: Any) -> _Model:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ExecutorAnswerError(200, "invalid_answer", f"not a {model.__name__}: {e}") from e


def _body(body: BaseModel | None) -> Any:
    return None if body is None else body.model_dump(mode="json")


def _evaluate_request(
    task: FunctionTask | KernelTask,
    candidate: str | CandidateSource,
    options: EvaluationOptions | None,
    caller: str | None = None,
) -> EvaluateRequest:
    return EvaluateRequest(
        task=task,
        candidate=candidate if isinstance(candidate, CandidateSource) else CandidateSource(source=candidate),
        options=options or EvaluationOptions(),
        caller=caller,
    )


def _batch_request(
    items: list[tuple[FunctionTask | KernelTask, str]],
    options: EvaluationOptions | None,
    caller: str | None = None,
) -> BatchRequest:
    opts = options or EvaluationOptions()
    # Each item is validated here; the batch's own limits (not empty, at most max_batch items) are the
    # service's to enforce, with its error envelope.
    return BatchRequest.model_construct(
        items=[
            EvaluateRequest(task=t, candidate=CandidateSource(source=s), options=opts, caller=caller)
            for t, s in items
        ]
    )


class ExecutorClient:
    """``ExecutorClient("http://127.0.0.1:8081").evaluate(task, source)``."""

    def __init__(self, base_url: str, timeout_s: float = 960.0) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s)
        self._base_url, self._timeout_s = base_url, timeout_s

    def asynchronous(self) -> AsyncExecutorClient:
        """An `AsyncExecutorClient` for the same executor and limit (the caller closes it): for a call
        made from an event loop that must end with its task when the task is cancelled."""
        return AsyncExecutorClient(self._base_url, self._timeout_s)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ExecutorClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @_transport_retry
    def _send(self, method: str, path: str, json: Any) -> httpx.Response:
        return self._http.request(method, path, json=json)

    def _request(self, method: str, path: str, json: Any = None) -> Any:
        """The decoded JSON of a successful answer; every failure as an `ExecutorClientError`."""
        try:
            response = self._send(method, path, json)
        except httpx.TransportError as e:
            raise _unreachable(self._http.base_url, e) from e
        except httpx.HTTPError as e:  # a broken answer (undecodable body, redirect loop)
            raise ExecutorAnswerError(None, "unreadable", str(e)) from e
        return _decoded(response)

    def _call(self, model: type[_Model], method: str, path: str, body: BaseModel | None = None) -> _Model:
        return _validated(model, self._request(method, path, _body(body)))

    def evaluate(
        self,
        task: FunctionTask | KernelTask,
        candidate: str | CandidateSource,
        options: EvaluationOptions | None = None,
        caller: str | None = None,
    ) -> Verdict:
        """Evaluate one candidate source for a task (on behalf of ``caller``: see
        :attr:`EvaluateRequest.caller <executor.protocol.EvaluateRequest.caller>`)."""
        return self._call(
            Verdict, "POST", "/v1/evaluate", _evaluate_request(task, candidate, options, caller)
        )

    def evaluate_batch(
        self,
        items: list[tuple[FunctionTask | KernelTask, str]],
        options: EvaluationOptions | None = None,
        caller: str | None = None,
    ) -> list[Verdict]:
        """Evaluate several (task, source) pairs; verdicts come back in the same order. An item that the
        executor did not judge (its shut-down, or the batch past its request limit, came first) is a
        verdict whose error is in :data:`~executor.verdict.NOT_JUDGED` (``executor_stopped``,
        ``batch_timeout``): nothing about the candidate; evaluate it again."""
        batch = _batch_request(items, options, caller)
        return self._call(BatchResponse, "POST", "/v1/evaluate/batch", batch).verdicts

    def prepare(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions | None = None, wait_s: float = 0.0
    ) -> PrepareResponse:
        """Have the executor prepare ``task`` now (``POST /v1/prepare``: reference, timing set, serial
        reference and naive baseline timings), before its first candidate; answers at once, or with
        ``wait_s`` when that is done (``ready``) or after ``wait_s``."""
        body = PrepareRequest(task=task, options=options or EvaluationOptions(), wait_s=wait_s)
        return self._call(PrepareResponse, "POST", "/v1/prepare", body)

    def device(self) -> FleetDeviceInfo:
        """The executor's device description (``GET /v1/device``); a fleet's lists every replica's
        GPU under ``gpus`` (empty from a single executor)."""
        return self._call(FleetDeviceInfo, "GET", "/v1/device")

    def health(self) -> bool:
        """True when the service answers ``/healthz``."""
        return bool(self._request("GET", "/healthz").get("status") == "ok")


class AsyncExecutorClient:
    """``await AsyncExecutorClient(url).evaluate(task, source)``: `ExecutorClient` for an event loop.

    Cancelling the task that awaits a call closes its connection: nothing is left waiting for the
    executor's answer (the executor may still finish the work; its verdict goes nowhere).
    """

    def __init__(self, base_url: str, timeout_s: float = 960.0) -> None:
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout_s)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncExecutorClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    @_transport_retry
    async def _send(self, method: str, path: str, json: Any) -> httpx.Response:
        return await self._http.request(method, path, json=json)

    async def _request(self, method: str, path: str, json: Any = None) -> Any:
        try:
            response = await self._send(method, path, json)
        except httpx.TransportError as e:
            raise _unreachable(self._http.base_url, e) from e
        except httpx.HTTPError as e:
            raise ExecutorAnswerError(None, "unreadable", str(e)) from e
        return _decoded(response)

    async def _call(
        self, model: type[_Model], method: str, path: str, body: BaseModel | None = None
    ) -> _Model:
        return _validated(model, await self._request(method, path, _body(body)))

    async def evaluate(
        self,
        task: FunctionTask | KernelTask,
        candidate: str | CandidateSource,
        options: EvaluationOptions | None = None,
        caller: str | None = None,
    ) -> Verdict:
        """Evaluate one candidate source for a task (on behalf of ``caller``: see
        :attr:`EvaluateRequest.caller <executor.protocol.EvaluateRequest.caller>`)."""
        return await self._call(
            Verdict, "POST", "/v1/evaluate", _evaluate_request(task, candidate, options, caller)
        )

    async def evaluate_batch(
        self,
        items: list[tuple[FunctionTask | KernelTask, str]],
        options: EvaluationOptions | None = None,
        caller: str | None = None,
    ) -> list[Verdict]:
        """`ExecutorClient.evaluate_batch` for an event loop (items not judged included)."""
        batch = _batch_request(items, options, caller)
        return (await self._call(BatchResponse, "POST", "/v1/evaluate/batch", batch)).verdicts

    async def prepare(
        self, task: FunctionTask | KernelTask, options: EvaluationOptions | None = None, wait_s: float = 0.0
    ) -> PrepareResponse:
        """`ExecutorClient.prepare` for an event loop."""
        body = PrepareRequest(task=task, options=options or EvaluationOptions(), wait_s=wait_s)
        return await self._call(PrepareResponse, "POST", "/v1/prepare", body)

    async def device(self) -> FleetDeviceInfo:
        """The executor's device description (``GET /v1/device``)."""
        return await self._call(FleetDeviceInfo, "GET", "/v1/device")

    async def health(self) -> bool:
        """True when the service answers ``/healthz``."""
        return bool((await self._request("GET", "/healthz")).get("status") == "ok")
