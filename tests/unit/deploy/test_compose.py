"""docker-compose.yml checked statically (no Docker engine runs here): it parses, and what the API
points at exists with consistent ports, versions and settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from api.settings import ApiSettings
from search.backends.config import ModelRoles

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    text = (ROOT / "docker-compose.yml").read_text()
    # Compose interpolation: give required variables a value, as `docker compose config` would.
    text = re.sub(r"\$\{(\w+):\?[^}]*\}", "test-password-123", text)
    text = re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", text)
    parsed = yaml.safe_load(text)
    assert isinstance(parsed, dict)
    return parsed


def _env(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def _exposed(service: dict[str, Any]) -> set[int]:
    ports = {int(str(p).split(":")[-1]) for p in service.get("expose", [])}
    ports |= {int(str(p).split(":")[-1]) for p in service.get("ports", [])}
    return ports


def test_all_four_services_are_defined(compose: dict[str, Any]) -> None:
    assert {"neo4j", "api", "executor", "vllm"} <= set(compose["services"])


def test_api_points_at_services_that_exist_on_their_ports(compose: dict[str, Any]) -> None:
    services = compose["services"]
    env = _env(services["api"])
    for variable in ("NEO4J_URI", "REGRAPH_EXECUTOR_URL", "REGRAPH_MODELS__GENERATOR__BASE_URL"):
        url = urlparse(env[variable])
        assert url.hostname in services, f"{variable} names {url.hostname}, which is not a service"
        assert url.port in _exposed(services[url.hostname]), f"{variable}: port {url.port} not exposed"
    assert set(services["api"]["depends_on"]) >= {"neo4j", "executor"}


def test_api_environment_is_valid_settings(compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in _env(compose["services"]["api"]).items():
        monkeypatch.setenv(key, value)
    settings = ApiSettings()
    assert settings.neo4j_uri == "bolt://neo4j:7687"
    assert settings.neo4j_password is not None
    assert settings.executor_url == "http://executor:8081"
    roles = ModelRoles()
    assert roles.generator is not None
    assert roles.generator.backend == "openai"
    assert roles.generator.model == "Qwen/Qwen2.5-Coder-7B-Instruct"


def test_executor_listens_where_the_api_looks(compose: dict[str, Any]) -> None:
    executor = compose["services"]["executor"]
    assert _env(executor)["REGRAPH_EXECUTOR_PORT"] == "8081"
    assert "8081" in executor["command"]


def test_vllm_serves_the_generator_model_on_its_port(compose: dict[str, Any]) -> None:
    vllm = compose["services"]["vllm"]
    command = vllm["command"]
    assert (
        command[command.index("--model") + 1]
        == _env(compose["services"]["api"])["REGRAPH_MODELS__GENERATOR__MODEL"]
    )
    assert int(command[command.index("--port") + 1]) in _exposed(vllm)
    assert any("/root/.cache/huggingface" in v for v in vllm["volumes"])


@pytest.mark.parametrize("name", ["executor", "vllm"])
def test_gpu_services_reserve_an_nvidia_gpu(compose: dict[str, Any], name: str) -> None:
    devices = compose["services"][name]["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)


def test_neo4j_matches_the_embedded_version_and_has_healthcheck_and_volume(compose: dict[str, Any]) -> None:
    neo4j = compose["services"]["neo4j"]
    pom = (ROOT / "graphdb" / "launcher" / "pom.xml").read_text()
    match = re.search(r"<neo4j.version>([^<]+)</neo4j.version>", pom)
    assert match is not None
    assert neo4j["image"] == f"neo4j:{match.group(1)}-community"
    assert "healthcheck" in neo4j
    assert any(v.endswith(":/data") for v in neo4j["volumes"])
    assert set(compose["volumes"]) >= {"neo4j-data", "model-cache"}


def test_dockerfiles_exist(compose: dict[str, Any]) -> None:
    for name in ("api", "executor"):
        build = compose["services"][name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).is_file()


def test_the_fleet_profile_has_a_ray_head_and_a_gpu_worker(compose: dict[str, Any]) -> None:
    services = compose["services"]
    head, worker = services["ray-head"], services["ray-gpu-worker"]
    assert head["profiles"] == ["fleet"] and worker["profiles"] == ["fleet"]
    assert "--head" in head["command"] and "--port=6379" in head["command"]
    assert 6379 in _exposed(head)
    # The worker joins the head on the port it listens on, and offers its GPUs to the replicas.
    address = next(a.split("=", 1)[1] for a in worker["command"] if a.startswith("--address="))
    host, port = address.split(":")
    assert host in services and int(port) in _exposed(services[host])
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and "gpu" in devices[0]["capabilities"]
    assert worker["depends_on"]["ray-head"]["condition"] == "service_healthy"
    # Both run the executor's image, so the replicas import the same code as the router.
    assert head["build"] == worker["build"] == services["executor"]["build"]
    # Default `docker compose up` starts no Ray: only the profile does.
    assert all("profiles" not in services[name] for name in ("neo4j", "api", "executor", "vllm"))


def test_the_executor_becomes_the_fleet_router_when_ray_is_named(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from executor.settings import ExecutorSettings

    env = _env(compose["services"]["executor"])
    assert "REGRAPH_EXECUTOR_RAY" in env
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert not ExecutorSettings().ray  # unset by default: one executor, as before
    monkeypatch.setenv("REGRAPH_EXECUTOR_RAY", "ray-head:6379")
    settings = ExecutorSettings()
    host = (settings.ray or "").split(":")[0]
    assert host in compose["services"] and 6379 in _exposed(compose["services"][host])
