"""Roles at every boundary: no key / unknown key -> 401, too low a role -> 403 (nothing written), enough -> served."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api.graph_support import (
    FLAGGED_NAME,
    FLAGGED_NEAR,
    TILING,
    SeededGraph,
    restore,
    seed_graph,
    serve,
)

RANK = [Role.READER, Role.CURATOR, Role.ADMIN]


@pytest.fixture(scope="module")
def seeded(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> SeededGraph:
    """The module's graph, built once with the real construction pipeline."""
    return seed_graph(neo4j_driver, neo4j_target)


@pytest.fixture()
def graph(seeded: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> SeededGraph:
    """The module's graph, restored exactly before this test."""
    restore(neo4j_driver, neo4j_target, seeded)
    return seeded


@pytest.fixture(scope="module")
def api_url(neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The API (real uvicorn on loopback) with the default settings: no anonymous reading."""
    yield from serve(neo4j_target, Path(tmp_path_factory.mktemp("graph-api")))


@dataclass(frozen=True)
class Route:
    method: str
    path: Callable[[SeededGraph], str]
    body: Callable[[SeededGraph], Any] | None
    needs: Role


def first_example(g: SeededGraph) -> str:
    return sorted(e.id for e in g.export.examples)[0]


def flagged_decision(g: SeededGraph) -> str:
    return next(d.id for d in g.export.decisions if d.outcome.value == "flagged")


def reader_key(g: SeededGraph) -> str:
    return next(k.id for k in g.keys if k.role is Role.READER)


ROUTES = {
    "retrieve": Route(
        "POST", lambda g: "/v1/retrieve", lambda g: {"technique": TILING, "code": "int x;"}, Role.READER
    ),
    "search": Route("GET", lambda g: "/v1/techniques/search?q=tiling", None, Role.READER),
    "list techniques": Route("GET", lambda g: "/v1/techniques", None, Role.READER),
    "get technique": Route("GET", lambda g: "/v1/techniques/Parallelization", None, Role.READER),
    "transitions": Route("GET", lambda g: "/v1/transitions", None, Role.READER),
    "examples": Route("GET", lambda g: "/v1/examples?status=pending", None, Role.READER),
    "get example": Route("GET", lambda g: f"/v1/examples/{first_example(g)}", None, Role.READER),
    "decisions": Route("GET", lambda g: "/v1/relabel-decisions", None, Role.READER),
    "audit": Route("GET", lambda g: "/v1/audit", None, Role.READER),
    "cypher": Route("POST", lambda g: "/v1/cypher", lambda g: {"query": "RETURN 1 AS one"}, Role.READER),
    "create technique": Route(
        "POST", lambda g: "/v1/techniques", lambda g: {"name": "Kernel fusion"}, Role.CURATOR
    ),
    "update technique": Route(
        "PATCH", lambda g: "/v1/techniques/Loop%20unrolling", lambda g: {"description": "x"}, Role.CURATOR
    ),
    "merge": Route(
        "POST",
        lambda g: "/v1/techniques/merge",
        lambda g: {"source": FLAGGED_NAME, "into": FLAGGED_NEAR},
        Role.CURATOR,
    ),
    "review": Route(
        "POST",
        lambda g: f"/v1/examples/{first_example(g)}/review",
        lambda g: {"decision": "reject"},
        Role.CURATOR,
    ),
    "split": Route(
        "POST",
        lambda g: f"/v1/examples/{first_example(g)}/split",
        lambda g: {"source": "sequential code", "target": "Occupancy-aware launch bounds"},
        Role.CURATOR,
    ),
    "delete example": Route("DELETE", lambda g: f"/v1/examples/{first_example(g)}", None, Role.CURATOR),
    "undo decision": Route(
        "POST", lambda g: f"/v1/relabel-decisions/{flagged_decision(g)}/undo", lambda g: {}, Role.CURATOR
    ),
    "export": Route("GET", lambda g: "/v1/graph/export", None, Role.ADMIN),
    "import": Route(
        "POST", lambda g: "/v1/graph/import", lambda g: g.export.model_dump(mode="json"), Role.ADMIN
    ),
    "create key": Route(
        "POST", lambda g: "/v1/keys", lambda g: {"name": "new-key", "role": "reader"}, Role.ADMIN
    ),
    "list keys": Route("GET", lambda g: "/v1/keys", None, Role.ADMIN),
    "revoke key": Route("POST", lambda g: f"/v1/keys/{reader_key(g)}/revoke", lambda g: {}, Role.ADMIN),
}


def call(url: str, route: Route, g: SeededGraph, headers: dict[str, str]) -> httpx.Response:
    body = route.body(g) if route.body is not None else None
    return httpx.request(route.method, f"{url}{route.path(g)}", headers=headers, json=body, timeout=60)


def snapshot(driver: Driver, target: Neo4jTarget) -> dict[str, Any]:
    return Neo4jGraphStore(driver, target.database).export_graph().model_dump(exclude={"exported_at"})


@pytest.mark.parametrize("name", list(ROUTES))
def test_role_boundaries(
    name: str, api_url: str, graph: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    route = ROUTES[name]
    before = snapshot(neo4j_driver, neo4j_target)
    for headers in ({}, {"X-API-Key": "rg_not-a-key"}, {"Authorization": "Bearer rg_not-a-key"}):
        response = call(api_url, route, graph, headers)
        assert response.status_code == 401, (headers, response.text)
        assert response.json()["error"]["type"] == "unauthorized"
    for role in RANK[: RANK.index(route.needs)]:
        response = call(api_url, route, graph, graph.headers(role))
        assert response.status_code == 403, (role, response.text)
        assert response.json()["error"]["type"] == "forbidden"
        assert route.needs.value in response.json()["error"]["message"]
    # Refused requests wrote nothing, not even an audit entry.
    assert snapshot(neo4j_driver, neo4j_target) == before
    for attempt, role in enumerate(RANK[RANK.index(route.needs) :]):
        token = graph.tokens[role]
        # Both header forms are accepted. On the restored graph the first allowed call must succeed.
        response = call(api_url, route, graph, {"Authorization": f"Bearer {token}"})
        if name in REFUSED_BY_RULE:
            status, kind = REFUSED_BY_RULE[name]
            assert response.status_code == status, (role, response.text)
            assert response.json()["error"]["type"] == kind, response.text
        elif attempt == 0 or name not in ONCE_ONLY:
            assert response.status_code < 300, (role, response.text)
        else:
            # A repeat of a write that can only succeed once: success again, or the clean refusal its
            # changed target calls for, in the error envelope; never a server error.
            refusals = {404: "not_found", 409: "conflict", **ONCE_ONLY[name]}
            assert response.status_code < 300 or response.status_code in refusals, (role, response.text)
            if response.status_code >= 300:
                assert response.json()["error"]["type"] == refusals[response.status_code], response.text


# Writes whose repeat by a higher role finds their target already changed (deleted, merged...), with
# any refusal besides 404/409 that the route gives for it.
ONCE_ONLY: dict[str, dict[int, str]] = {
    "create key": {},
    "revoke key": {},
    "delete example": {},
    "undo decision": {},
    "merge": {},
    "split": {400: "bad_request"},  # the example is already on the target transition
    "create technique": {},
}
# Allowed, but refused by the route's own rule on this graph: import fills only an empty graph.
REFUSED_BY_RULE = {"import": (409, "conflict")}


def test_writes_are_audited_under_the_keys_name(api_url: str, graph: SeededGraph) -> None:
    response = call(api_url, ROUTES["create technique"], graph, graph.headers(Role.CURATOR))
    assert response.status_code == 201
    audit = httpx.get(
        f"{api_url}/v1/audit",
        params={"target": "technique:Kernel fusion"},
        headers=graph.headers(Role.READER),
    ).json()["items"]
    assert [(a["action"], a["actor"]) for a in audit] == [("technique.create", "test-curator")]


@pytest.fixture(scope="module")
def anonymous_url(neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve(neo4j_target, Path(tmp_path_factory.mktemp("graph-anon")), anonymous_read=True)


def test_anonymous_read_reads_but_never_writes(anonymous_url: str, graph: SeededGraph) -> None:
    for name, route in ROUTES.items():
        response = call(anonymous_url, route, graph, {})
        if route.needs is Role.READER:
            assert response.status_code == 200, (name, response.text)
        else:
            assert response.status_code == 401, (name, response.text)
    # A presented key is still checked: a wrong one is not silently downgraded to anonymous.
    wrong = call(anonymous_url, ROUTES["list techniques"], graph, {"X-API-Key": "rg_wrong"})
    assert wrong.status_code == 401
    curator = call(anonymous_url, ROUTES["create technique"], graph, graph.headers(Role.CURATOR))
    assert curator.status_code == 201 and curator.json()["created_by"] == "test-curator"
