"""Model backends: OpenAI-compatible HTTP, in-process vLLM (optional) and replay/record."""

from search.backends.base import (
    ChatMessage,
    ChatModel,
    Completion,
    ModelError,
    ModelHTTPError,
    ModelRateLimitError,
    ModelRequestError,
    ModelResponseError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransportError,
    ModelUnavailableError,
    ReplayMissError,
)
from search.backends.config import ModelRoles, RoleConfig, build_model

__all__ = [
    "ChatMessage",
    "ChatModel",
    "Completion",
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
    "ReplayMissError",
    "RoleConfig",
    "build_model",
]
