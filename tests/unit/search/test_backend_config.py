"""Role configuration, the backend factory, and the optional in-process vLLM backend."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from search.backends import ModelRoles, ModelUnavailableError, RoleConfig, build_model
from search.backends.openai import OpenAICompatibleModel
from search.backends.replay import RecordingModel, ReplayModel

HAS_VLLM = importlib.util.find_spec("vllm") is not None
VLLM_MODEL = os.environ.get("REGRAPH_VLLM_TEST_MODEL")  # a local model directory on the GPU host


def test_role_config_requires_what_the_backend_needs() -> None:
    with pytest.raises(ValidationError):
        RoleConfig(backend="openai", model="m")
    with pytest.raises(ValidationError):
        RoleConfig(backend="replay")
    with pytest.raises(ValidationError):
        RoleConfig(backend="vllm")


def test_factory_builds_each_backend(tmp_path: Path) -> None:
    replay = tmp_path / "r.jsonl"
    replay.write_text('{"completion": "hi"}\n')
    assert isinstance(build_model(RoleConfig(backend="replay", replay_path=replay)), ReplayModel)
    http = build_model(RoleConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))
    assert isinstance(http, OpenAICompatibleModel) and http.url == "http://127.0.0.1:9/v1/chat/completions"
    recorded = build_model(
        RoleConfig(
            backend="openai", base_url="http://127.0.0.1:9", model="m", record_path=tmp_path / "out.jsonl"
        )
    )
    assert isinstance(recorded, RecordingModel)
    asyncio.run(http.aclose())
    asyncio.run(recorded.aclose())


def test_missing_replay_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="cannot read replay file"):
        build_model(RoleConfig(backend="replay", replay_path=tmp_path / "absent.jsonl"))


def test_roles_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REGRAPH_MODELS__GENERATOR__BACKEND", "replay")
    monkeypatch.setenv("REGRAPH_MODELS__GENERATOR__REPLAY_PATH", str(tmp_path / "g.jsonl"))
    roles = ModelRoles()
    assert roles.generator is not None and roles.generator.backend == "replay"
    assert roles.teacher is None


@pytest.mark.skipif(HAS_VLLM, reason="vllm is installed here; this checks the error raised without it")
def test_vllm_backend_without_vllm_says_so() -> None:
    with pytest.raises(ModelUnavailableError, match="needs the vllm package"):
        build_model(RoleConfig(backend="vllm", model="any"))


@pytest.mark.gpu
@pytest.mark.skipif(
    not HAS_VLLM, reason="vllm is not importable on this machine (pip install vllm on a GPU host)"
)
def test_vllm_in_process_generates() -> None:
    from search.backends import ChatMessage

    model = build_model(RoleConfig(backend="vllm", model=VLLM_MODEL, engine_args={"max_model_len": 2048}))
    completion = asyncio.run(
        model.complete([ChatMessage(role="user", content="Say OK.")], max_tokens=8, temperature=0.0, seed=0)
    )
    assert completion.backend == "vllm" and completion.completion_tokens > 0
