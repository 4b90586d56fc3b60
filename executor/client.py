"""A small typed client of the executor's HTTP API."""

from __future__ import annotations

from typing import Any

import httpx
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from executor.errors import ExecutorError
from executor.evaluate import Candidate, EvaluateRequest
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import Verdict
from executor.worker import EvaluationOptions


class ExecutorClientError(ExecutorError):
    """The executor answered with an error envelope (or something unreadable)."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(f"executor answered {status} {kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message


# Only transport failures (connection refused/reset, timeouts) are retried: an answer, even 5xx, is final.
_transport_retry = retry(
    retry=retry_if_exception_type(httpx.TransportError),
    stop=stop_after_attempt(4),
    wait=wait_exponential(multiplier=0.2, max=3.0),
    reraise=True,
)


class ExecutorClient:
    """``ExecutorClient("http://127.0.0.1:8081").evaluate(task, source)``."""

    def __init__(self, base_url: str, timeout_s: float = 960.0) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ExecutorClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @_transport_retry
    def _request(self, method: str, path: str, json: Any = None) -> Any:
        response = self._http.request(method, path, json=json)
        if response.is_success:
            return response.json()
        try:
            error = response.json()["error"]
            raise ExecutorClientError(response.status_code, str(error["type"]), str(error["message"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ExecutorClientError(response.status_code, "unreadable", response.text[:500]) from e

    def evaluate(
        self,
        task: FunctionTask | KernelTask,
        candidate: str | Candidate,
        options: EvaluationOptions | None = None,
    ) -> Verdict:
        """Evaluate one candidate source for a task."""
        request = EvaluateRequest(
            task=task,
            candidate=candidate if isinstance(candidate, Candidate) else Candidate(source=candidate),
            options=options or EvaluationOptions(),
        )
        return Verdict.model_validate(self._request("POST", "/v1/evaluate", request.model_dump(mode="json")))

    def evaluate_batch(
        self, items: list[tuple[FunctionTask | KernelTask, str]], options: EvaluationOptions | None = None
    ) -> list[Verdict]:
        """Evaluate several (task, source) pairs; verdicts come back in the same order."""
        opts = options or EvaluationOptions()
        body = {
            "items": [
                EvaluateRequest(task=t, candidate=Candidate(source=s), options=opts).model_dump(mode="json")
                for t, s in items
            ]
        }
        data = self._request("POST", "/v1/evaluate/batch", body)
        return [Verdict.model_validate(v) for v in data["verdicts"]]

    def device(self) -> dict[str, Any]:
        """The executor's device description (``GET /v1/device``)."""
        result: dict[str, Any] = self._request("GET", "/v1/device")
        return result

    def health(self) -> bool:
        """True when the service answers ``/healthz``."""
        return bool(self._request("GET", "/healthz").get("status") == "ok")
