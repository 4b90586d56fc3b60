"""Which backend plays which role (generator, teacher, judge), and the factory that builds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from search.backends.base import BackendName, ChatModel, ModelUnavailableError
from search.errors import SearchConfigError


class RoleConfig(BaseModel):
    """One role's backend settings."""

    model_config = ConfigDict(extra="forbid")

    backend: BackendName = "openai"
    base_url: str | None = Field(default=None, description="openai: e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(default=None, description="openai/vllm: the served model name or path")
    api_key: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    replay_path: Path | None = Field(default=None, description="replay: the regraph.replay/v1 file")
    record_path: Path | None = Field(default=None, description="openai/vllm: also record answers here")
    engine_args: dict[str, Any] = Field(default_factory=dict, description="vllm: extra vllm.LLM arguments")

    @model_validator(mode="after")
    def _complete(self) -> RoleConfig:
        if self.backend == "openai" and (self.base_url is None or self.model is None):
            raise ValueError("backend 'openai' needs base_url and model")
        if self.backend == "vllm" and self.model is None:
            raise ValueError("backend 'vllm' needs model")
        if self.backend == "replay" and self.replay_path is None:
            raise ValueError("backend 'replay' needs replay_path")
        return self


MODEL_SETTINGS_HINT = (  # what to set when no generator is configured
    "set REGRAPH_MODELS__GENERATOR__BACKEND (openai, vllm or replay) and its settings: "
    "REGRAPH_MODELS__GENERATOR__BASE_URL and REGRAPH_MODELS__GENERATOR__MODEL for openai, "
    "REGRAPH_MODELS__GENERATOR__MODEL for vllm, REGRAPH_MODELS__GENERATOR__REPLAY_PATH for replay"
)


class ModelRoles(BaseSettings):
    """Backends per role, read from the environment, e.g. ``REGRAPH_MODELS__GENERATOR__BACKEND=replay``."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_MODELS__", env_nested_delimiter="__")

    generator: RoleConfig | None = None
    teacher: RoleConfig | None = None
    judge: RoleConfig | None = None


def build_model(role: RoleConfig) -> ChatModel:
    """Build the backend a role asks for (vllm is imported only here, and only when chosen)."""
    model: ChatModel
    if role.backend == "replay":
        from search.backends.replay import ReplayModel

        assert role.replay_path is not None  # checked by RoleConfig
        return ReplayModel.from_file(role.replay_path)
    if role.backend == "openai":
        from search.backends.openai import OpenAICompatibleModel

        assert role.base_url is not None and role.model is not None  # checked by RoleConfig
        model = OpenAICompatibleModel(
            role.base_url,
            role.model,
            api_key=role.api_key,
            timeout=role.timeout_s,
            max_attempts=role.max_attempts,
        )
    elif role.backend == "vllm":
        from search.backends.vllm_local import VLLMInProcessModel

        assert role.model is not None  # checked by RoleConfig
        model = VLLMInProcessModel(role.model, **role.engine_args)
    else:  # pragma: no cover - BackendName is a closed Literal
        raise SearchConfigError(f"unknown backend {role.backend!r}")
    if role.record_path is not None:
        from search.backends.replay import RecordingModel

        return RecordingModel(model, role.record_path)
    return model


__all__ = ["ModelRoles", "ModelUnavailableError", "RoleConfig", "build_model"]
