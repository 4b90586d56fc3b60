"""A merge made from the relabel queue is undone from the audit log like a curator's merge (issue 28).

Both kinds of queued decision: a name the relabeler had mapped onto a technique (its examples are split
out and moved) and a name that had become a technique of its own. The round trip is exact: the export
after merge + undo equals the export before the merge (except the audit log and the export time), and
the decision waits in the queue again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from tests.integration.api import test_relabel_api as relabel_api

pytestmark = pytest.mark.timeout(1200)
TIMEOUT = 300
MAPPED = relabel_api.FLAGGED_NAME  # mapped onto a technique, flagged (its code has no __ldg)
OWN = "Zorbification of the inner loop"  # queued as a technique of its own (a word nobody knows)

# The relabel API module's fixtures: the small taxonomy named by REGRAPH_TAXONOMY, the API on loopback.
taxonomy_file, api_url = relabel_api.taxonomy_file, relabel_api.api_url


@pytest.fixture(scope="module")
def built(neo4j_driver: Driver, neo4j_target: Neo4jTarget, taxonomy_file: Path) -> dict[Role, str]:
    """One trajectory with the two queued names; one API token per role."""
    return relabel_api.build_with_names(neo4j_driver, neo4j_target, taxonomy_file, {1: MAPPED, 2: OWN})


def knowledge(driver: Driver, target: Neo4jTarget) -> dict[str, Any]:
    """The export without what may differ (its time and the audit log)."""
    export = Neo4jGraphStore(driver, target.database).export_graph()
    return export.model_dump(mode="json", exclude={"exported_at", "audit"})


def test_a_queue_merge_is_undone_exactly_from_the_audit_log(
    api_url: str, built: dict[Role, str], neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    reader, curator = {"X-API-Key": built[Role.READER]}, {"X-API-Key": built[Role.CURATOR]}
    queue = httpx.get(f"{api_url}/v1/relabel-queue", headers=reader, timeout=TIMEOUT).json()["items"]
    by_name = {i["candidate"]: i for i in queue}
    assert MAPPED in by_name and OWN in by_name, sorted(by_name)
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    assert store.get_technique(OWN) is not None  # a technique of its own, waiting for review
    before = knowledge(neo4j_driver, neo4j_target)
    merges = []
    for name in (MAPPED, OWN):
        moved = httpx.post(
            f"{api_url}/v1/relabel-queue/{by_name[name]['id']}/merge",
            headers=curator,
            json={"into": "Loop unrolling"},
            timeout=TIMEOUT,
        )
        assert moved.status_code == 200, moved.text
        entry = httpx.get(
            f"{api_url}/v1/audit",
            headers=reader,
            params={"target": "technique:Loop unrolling"},
            timeout=TIMEOUT,
        ).json()["items"][0]
        assert entry["action"] == "technique.merge" and entry["details"]["decision"] == by_name[name]["id"]
        merges.append(entry["id"])
    assert {MAPPED, OWN} <= set(store.get_technique("Loop unrolling").aliases)
    assert knowledge(neo4j_driver, neo4j_target) != before
    # Newest first; the older one is refused while the newer holds what it produced.
    assert (
        httpx.post(f"{api_url}/v1/audit/{merges[0]}/undo", headers=curator, timeout=TIMEOUT).status_code
        == 409
    )
    for entry_id in reversed(merges):
        undone = httpx.post(f"{api_url}/v1/audit/{entry_id}/undo", headers=curator, timeout=TIMEOUT)
        assert undone.status_code == 200, undone.text
    assert knowledge(neo4j_driver, neo4j_target) == before
    # Both decisions wait in the queue again and can be resolved again.
    again = httpx.get(f"{api_url}/v1/relabel-queue", headers=reader, timeout=TIMEOUT).json()["items"]
    assert {MAPPED, OWN} <= {i["candidate"] for i in again}
    accepted = httpx.post(
        f"{api_url}/v1/relabel-queue/{by_name[OWN]['id']}/accept", headers=curator, timeout=TIMEOUT
    )
    assert accepted.status_code == 200, accepted.text
