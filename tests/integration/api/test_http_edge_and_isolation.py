"""Issue 15 over HTTP against the real stack: the body limit and authentication before the body (S7),
bounded query parameters, 405 with Allow, jobs that belong to their key (S4), the last admin key (S5)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.jobs import JobStore
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api.graph_support import clear, serve

MAX_BODY = 100_000
PER_KEY = 2
SLOW = "UNWIND range(1, 1000000000) AS x WITH x WHERE x % 7 = 12 RETURN count(x) AS c"
SOURCE = "__global__ void the_admins_kernel() {}"


@pytest.fixture(scope="module")
def keys(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> dict[Role, tuple[str, str]]:
    """One key per role on an empty graph: (key id, token)."""
    clear(neo4j_driver, neo4j_target)
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    out = {}
    for role in Role:
        key, token = store.create_api_key(f"edge-{role.value}", role, actor="bootstrap")
        out[role] = (key.id, token)
    return out


@pytest.fixture(scope="module")
def api_url(
    neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory, keys: dict[Role, tuple[str, str]]
) -> Iterator[str]:
    yield from serve(
        neo4j_target,
        Path(tmp_path_factory.mktemp("edge")),
        max_request_bytes=MAX_BODY,
        cypher_timeout_s=3.0,
        cypher_max_concurrent_per_key=PER_KEY,
    )


def auth(keys: dict[Role, tuple[str, str]], role: Role) -> dict[str, str]:
    return {"X-API-Key": keys[role][1]}


def raw_request(url: str, head: str, body_chunks: list[bytes], *, read_timeout_s: float = 20.0) -> bytes:
    """Send a request's head and the given body chunks, then read whatever the server answers."""
    parsed = urlparse(url)
    with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 80), timeout=10) as sock:
        sock.sendall(head.encode())
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break  # the server answered and closed: what it said is still readable
        sock.settimeout(read_timeout_s)
        try:
            return sock.recv(65536)
        except TimeoutError:
            return b""


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_no_body_is_read_without_a_valid_key(api_url: str) -> None:
    # S7: a chunked body without a key used to be read and parsed before authentication. Here only
    # the head and one chunk are sent; the answer must come without the rest of the body.
    head = (
        "POST /v1/cypher HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    answer = raw_request(api_url, head, [chunk(b'{"query": "RETURN 1"')])
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    wrong_key = head.replace("Host: x\r\n", "Host: x\r\nX-API-Key: rg_not-a-key\r\n")
    answer = raw_request(api_url, wrong_key, [chunk(b'{"query": "RETURN 1"')])
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_chunked_body_over_the_limit_is_refused_while_read(
    api_url: str, keys: dict[Role, tuple[str, str]]
) -> None:
    head = (
        f"POST /v1/cypher HTTP/1.1\r\nHost: x\r\nX-API-Key: {keys[Role.READER][1]}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b" " * 20_000
    chunks = [chunk(b'{"query": "RETURN 1", "parameters": {"p": "')] + [chunk(piece)] * 10
    answer = raw_request(api_url, head, chunks)  # no final chunk: the limit must not wait for the end
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"payload_too_large" in answer
    declared = httpx.post(
        f"{api_url}/v1/cypher", headers=auth(keys, Role.READER), content=b"x" * (MAX_BODY + 1)
    )
    assert declared.status_code == 413 and declared.json()["error"]["type"] == "payload_too_large"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/jobs?offset=9223372036854775808",
        "/v1/jobs?offset=9223372036854775807",
        "/v1/jobs/some-job/events?after=9223372036854775808",
    ],
)
def test_huge_offsets_and_cursors_are_4xx(path: str, api_url: str, keys: dict[Role, tuple[str, str]]) -> None:
    response = httpx.get(f"{api_url}{path}", headers=auth(keys, Role.READER))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["type"] == "validation_error"


def test_405_says_what_is_allowed(api_url: str, keys: dict[Role, tuple[str, str]]) -> None:
    response = httpx.put(f"{api_url}/v1/cypher", headers=auth(keys, Role.READER), json={})
    assert response.status_code == 405
    assert response.headers.get("allow") == "POST"
    assert response.json()["error"]["type"] == "method_not_allowed"


def test_a_job_belongs_to_its_key(
    api_url: str, keys: dict[Role, tuple[str, str]], neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    # S4: any key listed every job, read its source, and a reader cancelled an admin's queued job.
    jobs = JobStore(neo4j_driver, neo4j_target.database)
    admin_id, reader_id = keys[Role.ADMIN][0], keys[Role.READER][0]
    jobs.create("admins-job", method="mcgs", task_id="t", request={"source": SOURCE}, owner=admin_id)
    jobs.create("readers-job", method="mcgs", task_id="t", request={"source": "mine"}, owner=reader_id)
    reader, curator, admin = (auth(keys, r) for r in (Role.READER, Role.CURATOR, Role.ADMIN))

    listed = httpx.get(f"{api_url}/v1/jobs", headers=reader).json()["jobs"]
    assert [j["id"] for j in listed] == ["readers-job"]
    assert SOURCE not in httpx.get(f"{api_url}/v1/jobs", headers=curator).text
    for method, path in [
        ("GET", "/v1/jobs/admins-job"),
        ("GET", "/v1/jobs/admins-job/events"),
        ("DELETE", "/v1/jobs/admins-job"),
    ]:
        response = httpx.request(method, f"{api_url}{path}", headers=reader)
        assert response.status_code == 404, (method, path, response.text)
        assert SOURCE not in response.text
    assert jobs.get("admins-job").state == "queued"

    own = httpx.get(f"{api_url}/v1/jobs/readers-job", headers=reader)
    assert own.status_code == 200 and own.json()["request"]["source"] == "mine"
    everyone = {j["id"] for j in httpx.get(f"{api_url}/v1/jobs", headers=admin).json()["jobs"]}
    assert everyone == {"admins-job", "readers-job"}
    assert httpx.get(f"{api_url}/v1/jobs/readers-job", headers=admin).status_code == 200
    cancelled = httpx.delete(f"{api_url}/v1/jobs/admins-job", headers=admin)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"


def test_the_last_admin_key_cannot_be_revoked(
    api_url: str, keys: dict[Role, tuple[str, str]], neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    # S5: the only admin key revoked itself and locked everyone out.
    admin_id = keys[Role.ADMIN][0]
    refused = httpx.post(f"{api_url}/v1/keys/{admin_id}/revoke", headers=auth(keys, Role.ADMIN))
    assert refused.status_code == 409, refused.text
    assert "last live admin key" in refused.json()["error"]["message"]
    assert httpx.get(f"{api_url}/v1/keys", headers=auth(keys, Role.ADMIN)).status_code == 200

    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    second, second_token = store.create_api_key("edge-second-admin", Role.ADMIN, actor="bootstrap")
    revoked = httpx.post(f"{api_url}/v1/keys/{second.id}/revoke", headers=auth(keys, Role.ADMIN))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert httpx.get(f"{api_url}/v1/keys", headers={"X-API-Key": second_token}).status_code == 401


def test_openapi_declares_what_the_gate_answers(api_url: str) -> None:
    paths = httpx.get(f"{api_url}/openapi.json").json()["paths"]
    with_body = [
        (path, method, operation["responses"])
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    assert len(with_body) >= 5
    for path, method, answers in with_body:
        assert "413" in answers, (method, path)
        assert not path.startswith("/v1/") or "401" in answers, (method, path)


def test_one_key_runs_a_bounded_number_of_queries_and_health_still_answers(
    api_url: str, keys: dict[Role, tuple[str, str]]
) -> None:
    def slow(token: str) -> int:
        body = {"query": SLOW}
        response = httpx.post(f"{api_url}/v1/cypher", headers={"X-API-Key": token}, json=body, timeout=120)
        assert response.status_code != 429 or response.headers["retry-after"] == "1"
        return response.status_code

    with ThreadPoolExecutor(max_workers=PER_KEY + 3) as pool:
        reader = [pool.submit(slow, keys[Role.READER][1]) for _ in range(PER_KEY + 2)]
        other = pool.submit(slow, keys[Role.CURATOR][1])
        # While they run, liveness answers (not timed: only that it answers at all here).
        assert httpx.get(f"{api_url}/healthz", timeout=60).status_code == 200
        statuses = sorted(f.result() for f in reader)
        assert other.result() == 400  # stopped at the timeout: another key's slots are its own
    assert statuses.count(429) >= 1 and set(statuses) <= {400, 429}, statuses
