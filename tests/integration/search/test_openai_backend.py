"""The OpenAI-compatible backend against a real HTTP server on 127.0.0.1 (the LLM test stand-in)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from search.backends import (
    ChatMessage,
    ModelRateLimitError,
    ModelRequestError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransportError,
)
from search.backends.openai import OpenAICompatibleModel
from tests.support.openai_test_server import OpenAITestServer

MESSAGES = [ChatMessage(role="system", content="be brief"), ChatMessage(role="user", content="hello there")]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh_script(server: OpenAITestServer) -> None:
    server.reset()


def _model(server: OpenAITestServer, **kwargs: float) -> OpenAICompatibleModel:
    options: dict[str, float] = {"backoff_initial": 0.01, "backoff_max": 0.05, **kwargs}
    return OpenAICompatibleModel(
        server.base_url,
        "test-model",
        api_key="k",
        timeout=options.pop("timeout", 5.0),
        max_attempts=int(options.pop("max_attempts", 4)),
        **options,
    )


def _complete(model: OpenAICompatibleModel, **kwargs: object) -> object:
    async def run() -> object:
        try:
            return await model.complete(MESSAGES, max_tokens=64, temperature=0.0, seed=7, **kwargs)  # type: ignore[arg-type]
        finally:
            await model.aclose()

    return asyncio.run(run())


def test_answer_and_token_usage(server: OpenAITestServer) -> None:
    server.script("three word answer")
    before = len(server.requests)
    completion = _complete(_model(server))
    assert completion.text == "three word answer"  # type: ignore[attr-defined]
    assert completion.completion_tokens == 3  # type: ignore[attr-defined]
    assert completion.prompt_tokens == len("be brief" + "hello there") // 4  # type: ignore[attr-defined]
    assert completion.backend == "openai"  # type: ignore[attr-defined]
    body = server.requests[before]
    assert body["seed"] == 7 and body["max_tokens"] == 64 and body["model"] == "test-model"
    assert body["messages"][1] == {"role": "user", "content": "hello there"}
    assert "response_format" not in body


def test_json_schema_is_passed_through(server: OpenAITestServer) -> None:
    schema = {"title": "verdict", "type": "object", "properties": {"ok": {"type": "boolean"}}}
    server.script('{"ok": true}')
    before = len(server.requests)
    _complete(_model(server), json_schema=schema)
    fmt = server.requests[before]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == schema and fmt["json_schema"]["name"] == "verdict"


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_rate_limits_and_server_errors(server: OpenAITestServer, status: int) -> None:
    server.fail_next(status, times=2)
    server.script("after retries")
    before = len(server.requests)
    completion = _complete(_model(server))
    assert completion.text == "after retries"  # type: ignore[attr-defined]
    assert len(server.requests) - before == 3


def test_gives_up_after_max_attempts(server: OpenAITestServer) -> None:
    server.fail_next(500, times=3)
    before = len(server.requests)
    with pytest.raises(ModelServerError):
        _complete(_model(server, max_attempts=3))
    assert len(server.requests) - before == 3


def test_retry_after_is_honoured(server: OpenAITestServer) -> None:
    server.fail_next(429, times=1, retry_after=0.3)
    server.script("ok")
    start = time.monotonic()
    _complete(_model(server, backoff_max=1.0))
    assert time.monotonic() - start >= 0.3


def test_rate_limit_error_when_exhausted(server: OpenAITestServer) -> None:
    server.fail_next(429, times=2)
    with pytest.raises(ModelRateLimitError):
        _complete(_model(server, max_attempts=2))


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_no_retry_on_other_client_errors(server: OpenAITestServer, status: int) -> None:
    server.fail_next(status, times=1)
    server.script("never reached")
    before = len(server.requests)
    with pytest.raises(ModelRequestError) as info:
        _complete(_model(server))
    assert info.value.status_code == status
    assert len(server.requests) - before == 1


def test_timeout_is_retried_then_raised(server: OpenAITestServer) -> None:
    server.stall_next(0.6, times=2)
    server.script("late", "late")
    before = len(server.requests)
    with pytest.raises(ModelTimeoutError):
        _complete(_model(server, timeout=0.2, max_attempts=2))
    assert len(server.requests) - before == 2
    time.sleep(0.7)  # let the stalled handlers finish and consume their scripted replies


def test_timeout_then_success(server: OpenAITestServer) -> None:
    server.stall_next(0.6, times=1)
    server.script("answer to the retry", "answer to the abandoned request")
    completion = _complete(_model(server, timeout=0.2))
    # The retry is answered at once, while the abandoned first request is still stalled.
    assert completion.text == "answer to the retry"  # type: ignore[attr-defined]
    assert len(server.requests) == 2
    time.sleep(0.7)


def test_connection_refused_is_a_transport_error() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAICompatibleModel(f"http://127.0.0.1:{port}", "m", max_attempts=2, backoff_initial=0.01)
    with pytest.raises(ModelTransportError):
        _complete(model)
