"""The chat-model port shared by every backend, and the model error hierarchy."""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from search.errors import SearchError

BackendName = Literal["openai", "vllm", "replay", "transformers"]


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
    backend: str = Field(
        description='"openai", "vllm", "transformers" or "replay"; replayed answers always say "replay"'
    )
    finish_reason: str | None = None
    generation_s: float | None = Field(
        default=None, ge=0, description="in-process backends: seconds spent generating (not waiting)"
    )


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


@runtime_checkable
class ContextLimited(Protocol):
    """A model that says how many tokens a prompt takes and how many fit (in-process backends).

    The step policy uses it to trim retrieved examples so that the prompt fits (`search.policy`).
    """

    def count_prompt_tokens(self, messages: list[ChatMessage]) -> int:
        """Tokens `messages` take with the model's chat template."""
        ...

    def prompt_budget(self, max_tokens: int) -> int:
        """The most prompt tokens that leave room for an answer of `max_tokens`."""
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


class PromptTooLongError(ModelError):
    """The prompt does not fit the model's context (with room for an answer): it was not sent."""

    def __init__(self, prompt_tokens: int, limit: int) -> None:
        super().__init__(
            f"the prompt takes {prompt_tokens} tokens, more than the {limit} the model's context leaves "
            "for it; it was not sent"
        )
        self.prompt_tokens = prompt_tokens
        self.limit = limit


class ReplayMissError(ModelError):
    """A replay file has no record matching the request."""
