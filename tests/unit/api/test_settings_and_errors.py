"""Settings from the environment, and the error envelope on every kind of failure (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel, ValidationError

from api.errors import ServiceError, ServiceErrorKind, install_error_handlers
from api.settings import ApiSettings
from api.state import graph_options
from graphdb.connection import ACQUISITION_TIMEOUT_S


def test_defaults_run_everything_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("NEO4J_URI", "REGRAPH_NEO4J_URI", "REGRAPH_PORT", "REGRAPH_EXECUTOR_URL"):
        monkeypatch.delenv(var, raising=False)
    settings = ApiSettings()
    assert settings.neo4j_uri is None
    assert settings.executor_url is None
    assert settings.port == 8080
    assert settings.neo4j_port == 7687


def test_environment_prefix_and_neo4j_aliases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REGRAPH_PORT", "9001")
    monkeypatch.setenv("REGRAPH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NEO4J_URI", "bolt://db.example:7687")
    monkeypatch.setenv("NEO4J_PASSWORD", "s3cret-pass")
    settings = ApiSettings()
    assert settings.port == 9001
    assert settings.data_dir == tmp_path
    assert settings.neo4j_uri == "bolt://db.example:7687"
    assert settings.neo4j_password is not None
    assert settings.neo4j_password.get_secret_value() == "s3cret-pass"
    assert "s3cret-pass" not in repr(settings)  # secrets stay out of logs


def test_the_graph_drivers_acquisition_limit_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REGRAPH_GRAPH_ACQUISITION_TIMEOUT_S", raising=False)
    assert graph_options(ApiSettings()).acquisition_timeout_s == ACQUISITION_TIMEOUT_S == 20.0
    monkeypatch.setenv("REGRAPH_GRAPH_ACQUISITION_TIMEOUT_S", "3")
    assert graph_options(ApiSettings()).acquisition_timeout_s == 3.0
    monkeypatch.setenv("REGRAPH_GRAPH_ACQUISITION_TIMEOUT_S", "0")
    with pytest.raises(ValidationError, match="graph_acquisition_timeout_s"):
        ApiSettings()


def test_invalid_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REGRAPH_PORT", "not-a-port")
    with pytest.raises(ValidationError, match="port"):
        ApiSettings()


class Item(BaseModel):
    name: str
    count: int


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/items")
    def create(item: Item) -> Item:
        if item.name == "dup":
            raise ServiceError("an item named dup exists", kind=ServiceErrorKind.CONFLICT)
        if item.name == "boom":
            raise RuntimeError("secret internal detail")
        return item

    return app


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "kind"),
    [
        ("post", "/items", {"name": "x", "count": "many"}, 422, "validation_error"),
        ("post", "/items", {"name": "dup", "count": 1}, 409, "conflict"),
        ("get", "/nowhere", None, 404, "not_found"),
        ("get", "/items", None, 405, "method_not_allowed"),
        ("post", "/items", {"name": "boom", "count": 1}, 500, "internal_error"),
    ],
)
def test_every_failure_uses_the_envelope(
    method: str, path: str, body: object, status: int, kind: str
) -> None:
    client = TestClient(_app(), raise_server_exceptions=False)
    response = client.request(method, path, json=body)
    assert response.status_code == status
    payload = response.json()
    assert set(payload) == {"error"}
    assert payload["error"]["code"] == status
    assert payload["error"]["type"] == kind
    assert payload["error"]["message"]
    assert "secret internal detail" not in payload["error"]["message"]


def test_validation_message_names_the_field() -> None:
    response = TestClient(_app()).post("/items", json={"name": "x"})
    assert response.status_code == 422
    assert "count" in response.json()["error"]["message"]
