"""A backend for any OpenAI-compatible ``/v1/chat/completions`` server (vLLM, llama.cpp, SGLang...)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from search.backends.base import (
    ChatMessage,
    Completion,
    ModelError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransportError,
)

logger = logging.getLogger(__name__)


def _chat_url(base_url: str) -> str:
    # Accept both "http://host:8000" and the OpenAI-style "http://host:8000/v1".
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


class OpenAICompatibleModel:
    """Chat completions over HTTP, retrying transport errors, 429 and 5xx (never other 4xx)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_attempts: int = 4,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        """Create the client; `timeout` is per attempt, `max_attempts` counts the first try."""
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.model = model
        self.url = _chat_url(base_url)
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=timeout, headers=headers)
        self._warned_no_usage = False

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.aclose()

    def _wait(self, state: RetryCallState) -> float:
        base = wait_exponential(multiplier=self.backoff_initial, max=self.backoff_max)(state)
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        # Honour the server's Retry-After on 429, within our own ceiling.
        if isinstance(exc, ModelRateLimitError) and exc.retry_after is not None:
            return min(max(base, exc.retry_after), self.backoff_max)
        return base

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """POST one chat completion request, with retries; see the class docstring."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
        }
        if seed is not None:
            body["seed"] = seed
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": str(json_schema.get("title", "response")), "schema": json_schema},
            }
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception_type((ModelTransportError, ModelRateLimitError, ModelServerError)),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                payload = await self._post(body)
        return self._parse(payload)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._client.post(self.url, json=body)
        except httpx.TimeoutException as e:
            raise ModelTimeoutError(f"{self.url}: no answer in time ({e!r})") from e
        except httpx.TransportError as e:
            raise ModelTransportError(f"{self.url}: {e!r}") from e
        if response.status_code == 429:
            logger.warning("model server rate-limited the request (429)")
            raise ModelRateLimitError(429, response.text[:500], _retry_after(response))
        if response.status_code >= 500:
            logger.warning("model server error %d", response.status_code)
            raise ModelServerError(response.status_code, response.text[:500])
        if response.status_code >= 400:
            raise ModelRequestError(response.status_code, response.text[:500])
        try:
            payload = response.json()
        except ValueError as e:
            raise ModelResponseError(f"{self.url}: answer is not JSON") from e
        if not isinstance(payload, dict):
            raise ModelResponseError(f"{self.url}: answer is not a JSON object")
        return payload

    def _parse(self, payload: dict[str, Any]) -> Completion:
        try:
            choice = payload["choices"][0]
            text = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as e:
            raise ModelResponseError(f"{self.url}: answer has no choices[0].message.content") from e
        if not isinstance(text, str):
            raise ModelResponseError(f"{self.url}: message content is not a string")
        usage = payload.get("usage")
        if isinstance(usage, dict):
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        else:
            # Budgets need a number; ~4 characters per token is the usual rough estimate.
            if not self._warned_no_usage:
                logger.warning("%s returns no usage; estimating tokens as characters/4", self.url)
                self._warned_no_usage = True
            prompt_tokens, completion_tokens = 0, max(1, len(text) // 4)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=str(payload.get("model", self.model)),
            backend="openai",
            finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
        )


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


__all__ = ["ModelError", "OpenAICompatibleModel"]
