"""Model backends: OpenAI-compatible HTTP, in-process transformers or vLLM (optional), replay/record."""

from search.backends.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ContextLimited,
    ModelError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransportError,
    ModelUnavailableError,
    PromptTooLongError,
    ReplayMissError,
)
from search.backends.config import ModelRoles, RoleConfig, build_model

__all__ = [
    "ChatMessage",
    "ChatModel",
    "Completion",
    "ContextLimited",
    "ModelError",
    "ModelHTTPError",
    "ModelRateLimitError",
    "ModelRequestError",
    "ModelResponseError",
    "ModelRoles",
    "ModelServerError",
    "ModelTimeoutError",
    "ModelTransportError",
    "ModelUnavailableError",
    "PromptTooLongError",
    "ReplayMissError",
    "RoleConfig",
    "build_model",
]
