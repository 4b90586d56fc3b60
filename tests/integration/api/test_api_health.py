"""The API over real HTTP against the session's real Neo4j: health, readiness, envelope, limits."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings, default_seed_graph
from graphdb.connection import Neo4jTarget
from graphdb.migrations import discover
from graphdb.store import Neo4jGraphStore
from tests.support.servers import serve_in_thread


@pytest.fixture(scope="module")
def api_url(neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ApiSettings(
        neo4j_uri=neo4j_target.uri,
        neo4j_password=SecretStr(neo4j_target.password),
        data_dir=Path(tmp_path_factory.mktemp("api-data")),
        max_request_bytes=10_000,
        log_format="text",
        seed_graph=None,  # the session's shared database stays as the tests leave it
    )
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_healthz(api_url: str) -> None:
    response = httpx.get(f"{api_url}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "startup": "ready"}


def test_readyz_reports_neo4j_and_latest_schema(api_url: str) -> None:
    response = httpx.get(f"{api_url}/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["neo4j"] == "ready"
    assert body["server_version"].startswith("5.26")
    assert body["schema_version"] == discover()[-1].version
    assert body["schema_up_to_date"] is True


def test_unknown_route_uses_the_envelope(api_url: str) -> None:
    response = httpx.get(f"{api_url}/v1/no-such-thing")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found"


def test_oversized_body_is_refused_with_413(api_url: str) -> None:
    response = httpx.post(f"{api_url}/healthz", content=b"x" * 20_000)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"


def test_openapi_documents_the_error_envelope(api_url: str) -> None:
    spec = httpx.get(f"{api_url}/openapi.json").json()
    readyz = spec["paths"]["/readyz"]["get"]["responses"]
    assert "503" in readyz
    assert "ErrorEnvelope" in str(readyz["503"])


def test_start_up_preloads_the_retrieval_cache_in_the_background(
    clean_graph: Driver, neo4j_target: Neo4jTarget, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="api.state")
    settings = ApiSettings(
        neo4j_uri=neo4j_target.uri,
        neo4j_password=SecretStr(neo4j_target.password),
        data_dir=tmp_path,
        log_format="text",
        seed_graph=default_seed_graph(),  # loaded into the emptied database, then preloaded
    )
    app = create_app(settings)
    with serve_in_thread(app):
        preload = app.state.regraph.preload
        assert preload is not None, "start-up started no preload"
        # Only this app's preload thread counts: another server on the shared database may still be
        # preloading (and logging the same message) while this one loads the seed graph. Matched by
        # the thread's name, unique per app (a finished thread's ident is reused by the next thread).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = [
                r
                for r in caplog.records
                if r.getMessage() == "retrieval preloaded" and r.threadName == preload.name
            ]
            if done:
                break
            time.sleep(0.2)
    assert done, "the preload never finished"
    record = done[0].__dict__
    techniques = Neo4jGraphStore(clean_graph, neo4j_target.database).list_techniques(limit=1000)
    assert record["techniques"] == len(techniques) > 20  # every technique of the seed graph
    assert record["transitions"] > 0 and record["mib"] > 0
