"""The chat-model port shared by every backend, and the model error hierarchy."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from search.errors import SearchError

BackendName = Literal["openai", "vllm", "replay"]


class ChatMessage(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class Completion(BaseModel):
    """A model answer with its token accounting and where it came from."""

    text: str
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    model: str
    backend: str = Field(description='"openai", "vllm" or "replay"; replayed answers always say "replay"')
    finish_reason: str | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


@runtime_checkable
class ChatModel(Protocol):
    """An asynchronous chat-completion model."""

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Answer `messages`; `json_schema`, when given, constrains the answer to that JSON schema."""
        ...

    async def aclose(self) -> None:
        """Release connections or engines held by the backend."""
        ...


class ModelError(SearchError):
    """Root of every model backend failure."""


class ModelUnavailableError(ModelError):
    """The backend cannot be used here (library not installed, file missing)."""


class ModelTransportError(ModelError):
    """The request never got an HTTP answer (connection refused, reset, DNS)."""


class ModelTimeoutError(ModelTransportError):
    """The model server did not answer in time."""


class ModelHTTPError(ModelError):
    """The model server answered with an HTTP error status."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code


class ModelRateLimitError(ModelHTTPError):
    """HTTP 429: retried, after the server's Retry-After when it sends one."""

    def __init__(self, status_code: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(status_code, message)
        self.retry_after = retry_after


class ModelServerError(ModelHTTPError):
    """HTTP 5xx: retried."""


class ModelRequestError(ModelHTTPError):
    """Any other 4xx: our request is wrong, never retried."""


class ModelResponseError(ModelError):
    """The answer could not be understood (not JSON, no choices, no content)."""


class ReplayMissError(ModelError):
    """A replay file has no record matching the request."""
