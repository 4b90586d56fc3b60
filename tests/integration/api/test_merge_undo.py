"""Undoing a technique merge from the audit log over real HTTP, against the embedded Neo4j.

The round trip is exact: the graph's export after merge + undo equals the export before the merge
(except the audit log, which records both, and the export time).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api import test_graph_api as graph_api
from tests.integration.api.graph_support import TILING, SeededGraph

# The graph API module's fixtures: the seeded graph restored before each test, the API on loopback.
seeded, graph, api_url = graph_api.seeded, graph_api.graph, graph_api.api_url


def knowledge(driver: Driver, target: Neo4jTarget) -> dict[str, Any]:
    """The export of the graph without what is allowed to differ (its time and the audit log)."""
    export = Neo4jGraphStore(driver, target.database).export_graph()
    return export.model_dump(mode="json", exclude={"exported_at", "audit"})


def post(
    url: str, g: SeededGraph, path: str, body: object = None, role: Role = Role.CURATOR
) -> httpx.Response:
    return httpx.post(f"{url}{path}", headers=g.headers(role), json=body, timeout=60)


def merge(url: str, g: SeededGraph, source: str, into: str) -> str:
    """Merge over HTTP; return the id of the merge's audit entry."""
    response = post(url, g, "/v1/techniques/merge", {"source": source, "into": into})
    assert response.status_code == 200, response.text
    entries = httpx.get(
        f"{url}/v1/audit", headers=g.headers(Role.READER), params={"target": f"technique:{into}"}, timeout=60
    ).json()["items"]
    entry = entries[0]
    assert entry["action"] == "technique.merge" and entry["details"]["merged"] == source
    return str(entry["id"])


def test_merge_then_undo_gives_back_the_export_exactly(
    api_url: str, graph: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    before = knowledge(neo4j_driver, neo4j_target)
    first = merge(api_url, graph, "Constant memory", "Memory coalescing")
    middle = knowledge(neo4j_driver, neo4j_target)
    # A second merge touching the first one's result (tiling's transitions meet coalescing's).
    second = merge(api_url, graph, TILING, "Memory coalescing")
    assert knowledge(neo4j_driver, neo4j_target) != middle != before
    # The older merge cannot be undone while the newer one holds the state it produced.
    stale = post(api_url, graph, f"/v1/audit/{first}/undo")
    assert stale.status_code == 409, stale.text
    assert "changed since" in stale.json()["error"]["message"]
    undone = post(api_url, graph, f"/v1/audit/{second}/undo")
    assert undone.status_code == 200, undone.text
    assert undone.json()["action"] == "technique.merge.undo" and undone.json()["target"] == f"audit:{second}"
    assert knowledge(neo4j_driver, neo4j_target) == middle
    assert post(api_url, graph, f"/v1/audit/{first}/undo").status_code == 200
    assert knowledge(neo4j_driver, neo4j_target) == before
    # Undoing twice is refused, and nothing changes.
    again = post(api_url, graph, f"/v1/audit/{first}/undo")
    assert again.status_code == 409 and "undone already" in again.json()["error"]["message"]
    assert knowledge(neo4j_driver, neo4j_target) == before
    audit = httpx.get(f"{api_url}/v1/audit", headers=graph.headers(Role.READER), timeout=60).json()["items"]
    assert [a["action"] for a in audit[:2]] == ["technique.merge.undo", "technique.merge.undo"]


def test_undo_refused_when_the_graph_changed_and_for_bad_requests(api_url: str, graph: SeededGraph) -> None:
    entry = merge(api_url, graph, "Constant memory", "Memory coalescing")
    assert post(api_url, graph, f"/v1/audit/{entry}/undo", role=Role.READER).status_code == 403
    assert post(api_url, graph, "/v1/audit/no-such-entry/undo").status_code == 404
    assert post(api_url, graph, f"/v1/audit/{quote('../x', safe='')}/undo").status_code in (404, 405)
    renamed = httpx.patch(
        f"{api_url}/v1/techniques/{quote('Memory coalescing')}",
        headers=graph.headers(Role.CURATOR),
        json={"name": "Coalesced accesses"},
        timeout=60,
    )
    assert renamed.status_code == 200, renamed.text
    changed = post(api_url, graph, f"/v1/audit/{entry}/undo")
    assert changed.status_code == 409 and "no longer a technique" in changed.json()["error"]["message"]
    # An entry that is not a merge (the rename) cannot be undone here.
    rename_entry = httpx.get(
        f"{api_url}/v1/audit", headers=graph.headers(Role.READER), params={"limit": 1}, timeout=60
    ).json()["items"][0]
    assert rename_entry["action"] == "technique.rename"
    refused = post(api_url, graph, f"/v1/audit/{rename_entry['id']}/undo")
    assert refused.status_code == 409 and "not a merge" in refused.json()["error"]["message"]
