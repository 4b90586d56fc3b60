"""A TEST STAND-IN FOR THE LLM: a tiny OpenAI-compatible chat-completions server.

It answers ``POST /v1/chat/completions`` from a scripted queue of replies, can be told to fail with
an HTTP status or to stall (to provoke client timeouts) for the next N requests, and records every
request body it received. It runs uvicorn on 127.0.0.1 on a free port in a background thread::

    with OpenAITestServer() as server:
        server.script("hello")
        model = OpenAICompatibleModel(server.base_url, "test-model")
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


@dataclass
class _Failure:
    status: int | None  # None: stall instead of answering
    stall_s: float = 0.0
    retry_after: float | None = None


class OpenAITestServer:
    """Scripted OpenAI-compatible server for tests (see module docstring)."""

    def __init__(self, model: str = "test-model") -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._replies: deque[tuple[str, str]] = deque()
        self._failures: deque[_Failure] = deque()
        self._lock = threading.Lock()
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", timeout_graceful_shutdown=1, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, ending in /v1."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *texts: str, finish_reason: str = "stop") -> None:
        """Queue replies, answered in order, one per successful request."""
        with self._lock:
            self._replies.extend((t, finish_reason) for t in texts)

    def reset(self) -> None:
        """Forget scripted replies, pending failures and recorded requests."""
        with self._lock:
            self._replies.clear()
            self._failures.clear()
            self.requests.clear()

    def fail_next(self, status: int, times: int = 1, retry_after: float | None = None) -> None:
        """Answer the next `times` requests with HTTP `status`."""
        with self._lock:
            self._failures.extend(_Failure(status, retry_after=retry_after) for _ in range(times))

    def stall_next(self, seconds: float, times: int = 1) -> None:
        """Delay the next `times` requests by `seconds` before answering them normally."""
        with self._lock:
            self._failures.extend(_Failure(None, stall_s=seconds) for _ in range(times))

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
            failure = self._failures.popleft() if self._failures else None
        if failure is not None and failure.status is not None:
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
            return JSONResponse({"error": {"message": "scripted failure"}}, failure.status, headers=headers)
        if failure is not None:
            await asyncio.sleep(failure.stall_s)
        with self._lock:
            reply = self._replies.popleft() if self._replies else None
        if reply is None:
            # 409 is not retried by clients, so an exhausted script shows up as a clear test failure.
            return JSONResponse({"error": {"message": "script exhausted"}}, 409)
        text, finish_reason = reply
        prompt_chars = sum(len(m.get("content", "")) for m in body.get("messages", []))
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "model": body.get("model", self.model),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": finish_reason,
                    }
                ],
                # Deterministic stand-in token counts: prompt chars/4 and one token per word.
                "usage": {
                    "prompt_tokens": prompt_chars // 4,
                    "completion_tokens": len(text.split()),
                    "total_tokens": prompt_chars // 4 + len(text.split()),
                },
            }
        )

    def start(self) -> OpenAITestServer:
        """Start serving and wait until the server accepts requests."""
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("OpenAI test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and join the thread."""
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
