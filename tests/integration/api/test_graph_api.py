"""The graph API over real HTTP against the real Neo4j, on a graph built by the real construction pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from neo4j import Driver

from graphdb.connection import Neo4jTarget
from graphdb.models import GraphExport, Role
from search.relabel.taxonomy import default_taxonomy
from tests.integration.api.graph_support import (
    FLAGGED_NAME,
    MAX_REQUEST_BYTES,
    TILING,
    SeededGraph,
    clear,
    restore,
    seed_graph,
    serve,
    steps,
)


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


def get(url: str, g: SeededGraph, path: str, role: Role = Role.READER, **params: object) -> httpx.Response:
    return httpx.get(f"{url}{path}", headers=g.headers(role), params=params, timeout=60)  # type: ignore[arg-type]


def post(url: str, g: SeededGraph, path: str, body: object, role: Role = Role.CURATOR) -> httpx.Response:
    return httpx.post(f"{url}{path}", headers=g.headers(role), json=body, timeout=60)


def patch(url: str, g: SeededGraph, path: str, body: object, role: Role = Role.CURATOR) -> httpx.Response:
    return httpx.patch(f"{url}{path}", headers=g.headers(role), json=body, timeout=60)


def error_type(response: httpx.Response) -> str:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == response.status_code
    return str(body["error"]["type"])


def test_retrieve_ranks_successors_examples_by_similarity_then_verified_speedup(
    api_url: str, graph: SeededGraph
) -> None:
    tiled_gemm = steps("gemm_f32")[1]["code"]
    response = post(
        api_url, graph, "/v1/retrieve", {"technique": TILING, "code": tiled_gemm, "k": 2}, Role.READER
    )
    assert response.status_code == 200, response.text
    body = response.json()
    by_target = {s["technique"]: s for s in body["successors"]}
    # The only example of tiling -> vectorized access was rejected, so that edge is not offered.
    assert set(by_target) == {"Thread coarsening", "Register tiling", "Loop unrolling"}
    coarsening = by_target["Thread coarsening"]
    assert coarsening["transition"]["stats"]["n_examples"] == 2
    assert coarsening["transition"]["stats"]["mean_speedup"] == pytest.approx(1.8)
    # Both examples start from exactly this code (similarity 1); the verified 1.8x one ranks first.
    examples = coarsening["examples"]
    assert [e["similarity"] for e in examples] == pytest.approx([1.0, 1.0], abs=1e-4)
    measured = {e.target: e for e in graph.measured}
    assert examples[0]["example"]["id"] == measured["Thread coarsening"].id
    assert examples[0]["example"]["speedup"] == pytest.approx(1.8)
    assert examples[1]["example"]["speedup"] is None
    assert "code_embedding" not in examples[0]["example"]
    # From knn's tiled code, knn's own unrolling step is the closest example of tiling -> unrolling.
    knn = post(
        api_url,
        graph,
        "/v1/retrieve",
        {"technique": TILING, "code": steps("knn_dist_f32")[1]["code"], "k": 1},
        Role.READER,
    ).json()
    unroll = next(s for s in knn["successors"] if s["technique"] == "Loop unrolling")
    assert unroll["examples"][0]["example"]["task_id"] == "knn_dist_f32"


def test_retrieve_bad_input(api_url: str, graph: SeededGraph) -> None:
    unknown = post(
        api_url, graph, "/v1/retrieve", {"technique": "Quantum tiling", "code": "int x;"}, Role.READER
    )
    assert unknown.status_code == 404 and error_type(unknown) == "not_found"
    assert "Quantum tiling" in unknown.json()["error"]["message"]
    too_many = post(
        api_url, graph, "/v1/retrieve", {"technique": TILING, "code": "int x;", "k": 500}, Role.READER
    )
    assert too_many.status_code == 422 and error_type(too_many) == "validation_error"
    extra = post(api_url, graph, "/v1/retrieve", {"technique": TILING, "code": "x", "kk": 1}, Role.READER)
    assert extra.status_code == 422
    huge = post(
        api_url,
        graph,
        "/v1/retrieve",
        {"technique": TILING, "code": "x" * (MAX_REQUEST_BYTES + 10)},
        Role.READER,
    )
    assert huge.status_code == 413 and error_type(huge) == "payload_too_large"


def test_technique_search_is_hybrid(api_url: str, graph: SeededGraph) -> None:
    # An alias written in the trajectories finds the technique it was merged into.
    alias = get(api_url, graph, "/v1/techniques/search", q="Shared-memory tiling", k=3)
    assert alias.status_code == 200, alias.text
    assert alias.json()["hits"][0]["technique"]["name"] == TILING
    # Words that appear in no name still find the technique through its embedding.
    semantic = get(
        api_url, graph, "/v1/techniques/search", q="__ldg texture path for read-only loads", k=3
    ).json()
    assert "Read-only cache (__ldg)" in [h["technique"]["name"] for h in semantic["hits"]]
    scores = [h["score"] for h in semantic["hits"]]
    assert scores == sorted(scores, reverse=True)
    assert get(api_url, graph, "/v1/techniques/search", q="").status_code == 422


def test_list_get_create_and_rename_techniques(api_url: str, graph: SeededGraph) -> None:
    listing = get(api_url, graph, "/v1/techniques", limit=5).json()
    names = [t["name"] for t in listing["items"]]
    assert names == sorted(t.name for t in graph.export.techniques)[:5]
    tiling = get(api_url, graph, f"/v1/techniques/{quote(TILING)}").json()
    assert tiling["aliases"] == ["Shared-memory tiling"] and "embedding" not in tiling
    missing = get(api_url, graph, "/v1/techniques/Quantum%20tiling")
    assert missing.status_code == 404 and error_type(missing) == "not_found"

    slashed = "Precomputation / lookup table"
    created = post(
        api_url, graph, "/v1/techniques", {"name": slashed, "description": "tables in constant memory"}
    )
    assert created.status_code == 201, created.text
    assert created.json()["created_by"] == "test-curator"
    assert get(api_url, graph, f"/v1/techniques/{quote(slashed, safe='')}").json()["name"] == slashed
    again = post(api_url, graph, "/v1/techniques", {"name": slashed.upper()})
    assert again.status_code == 409 and error_type(again) == "conflict"

    renamed = patch(
        api_url,
        graph,
        f"/v1/techniques/{quote('Thread coarsening')}",
        {"name": "Thread coarsening (more work per thread)", "description": "each thread does more"},
    )
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["aliases"] == ["Thread coarsening"]
    edge = get(
        api_url, graph, "/v1/transitions", source=TILING, target="Thread coarsening (more work per thread)"
    )
    assert edge.json()["items"][0]["stats"]["n_examples"] == 2
    audit = get(
        api_url, graph, "/v1/audit", target="technique:Thread coarsening (more work per thread)"
    ).json()
    actions = {(a["action"], a["actor"]) for a in audit["items"]}
    assert actions == {("technique.rename", "test-curator"), ("technique.describe", "test-curator")}

    # A rename onto a taken name is refused before anything is written: the description stays too.
    clash = patch(
        api_url,
        graph,
        f"/v1/techniques/{quote('Loop unrolling')}",
        {"name": "register tiling", "description": "changed"},
    )
    assert clash.status_code == 409
    # Refused: the description is still the one construction gave it (the taxonomy's), not "changed".
    unchanged = get(api_url, graph, f"/v1/techniques/{quote('Loop unrolling')}").json()["description"]
    assert unchanged == default_taxonomy().get("Loop unrolling").description
    initial = patch(api_url, graph, "/v1/techniques/sequential%20code", {"name": "serial"})
    assert initial.status_code == 400 and error_type(initial) == "bad_request"
    empty = patch(api_url, graph, f"/v1/techniques/{quote(TILING)}", {})
    assert empty.status_code == 422


def test_merge_moves_transitions_and_examples(api_url: str, graph: SeededGraph) -> None:
    before = {t.key: t.stats.n_examples for t in graph.export.transitions}
    merged = post(
        api_url,
        graph,
        "/v1/techniques/merge",
        {"source": "Constant memory", "into": "Memory coalescing"},
    )
    assert merged.status_code == 200, merged.text
    assert "Constant memory" in merged.json()["aliases"]
    edge = get(api_url, graph, "/v1/transitions", source="Parallelization", target="Memory coalescing").json()
    assert edge["items"][0]["stats"]["n_examples"] == (
        before["Parallelization -> Memory coalescing"] + before["Parallelization -> Constant memory"]
    )
    assert get(api_url, graph, "/v1/techniques/Constant%20memory").status_code == 404
    assert (
        post(
            api_url, graph, "/v1/techniques/merge", {"source": "Loop unrolling", "into": "Loop unrolling"}
        ).status_code
        == 400
    )
    assert (
        post(api_url, graph, "/v1/techniques/merge", {"source": "Nope", "into": "Loop unrolling"}).status_code
        == 404
    )


def test_examples_review_split_and_delete(api_url: str, graph: SeededGraph) -> None:
    pending = get(api_url, graph, "/v1/examples", status="pending", limit=1000).json()["items"]
    assert len(pending) == sum(1 for e in graph.export.examples if e.review_status.value == "pending")
    one = get(api_url, graph, "/v1/examples", source="Parallelization", target="Constant memory").json()[
        "items"
    ][0]
    assert one["task_id"] == "conv2d_3x3_f32" and one["target_label"] == "Constant memory"

    approved = post(
        api_url, graph, f"/v1/examples/{one['id']}/review", {"decision": "approve", "reason": "checked"}
    )
    assert approved.status_code == 200 and approved.json()["review_status"] == "approved"
    rejected = post(
        api_url, graph, f"/v1/examples/{one['id']}/review", {"decision": "reject", "reason": "wrong"}
    )
    assert rejected.json()["review_status"] == "rejected"
    stats = get(api_url, graph, "/v1/transitions", source="Parallelization", target="Constant memory").json()
    assert stats["items"][0]["stats"]["n_rejected"] == 1 and stats["items"][0]["stats"]["n_examples"] == 0
    assert post(api_url, graph, "/v1/examples/nope/review", {"decision": "approve"}).status_code == 404
    assert post(api_url, graph, f"/v1/examples/{one['id']}/review", {"decision": "maybe"}).status_code == 422

    # Split: the conv2d tiling step is moved to constant memory -> register tiling (a new transition).
    step = get(api_url, graph, "/v1/examples", source="Constant memory", target=TILING).json()["items"][0]
    moved = post(api_url, graph, f"/v1/examples/{step['id']}/split", {"target": "Register tiling"})
    assert moved.status_code == 200, moved.text
    assert (moved.json()["source"], moved.json()["target"]) == ("Constant memory", "Register tiling")
    new_edge = get(
        api_url, graph, "/v1/transitions", source="Constant memory", target="Register tiling"
    ).json()
    assert new_edge["items"][0]["stats"]["n_examples"] == 1
    # The old transition lost its only example and is gone.
    assert get(api_url, graph, "/v1/transitions", source="Constant memory", target=TILING).status_code == 404
    assert post(api_url, graph, f"/v1/examples/{step['id']}/split", {"target": "Nope"}).status_code == 404

    deleted = httpx.delete(f"{api_url}/v1/examples/{step['id']}", headers=graph.headers(Role.CURATOR))
    assert deleted.status_code == 204
    assert get(api_url, graph, f"/v1/examples/{step['id']}").status_code == 404
    assert (
        httpx.delete(f"{api_url}/v1/examples/{step['id']}", headers=graph.headers(Role.CURATOR)).status_code
        == 404
    )
    audit = get(api_url, graph, "/v1/audit", target=f"example:{step['id']}").json()["items"]
    assert [a["action"] for a in audit] == ["example.delete", "example.move"]
    assert {a["actor"] for a in audit} == {"test-curator"}
    assert get(api_url, graph, "/v1/examples", source="Parallelization").status_code == 400


def test_relabel_decisions_undo(api_url: str, graph: SeededGraph) -> None:
    # The taxonomy knows every spelling of these trajectories: nothing is left undecided but the one
    # flagged name the seeded graph records on purpose (graph_support.seed_graph).
    flagged = get(api_url, graph, "/v1/relabel-decisions", outcome="flagged").json()["items"]
    assert [d["candidate"] for d in flagged] == [FLAGGED_NAME]
    merged = get(api_url, graph, "/v1/relabel-decisions", outcome="merged").json()["items"]
    assert [(d["candidate"], d["technique"]) for d in merged] == [("Shared-memory tiling", TILING)]
    assert "candidate_embedding" not in merged[0]
    hyphen = next(d for d in merged if d["candidate"] == "Shared-memory tiling")

    undone = post(api_url, graph, f"/v1/relabel-decisions/{hyphen['id']}/undo", {})
    assert undone.status_code == 200, undone.text
    assert undone.json()["undone_by"] == "test-curator"
    # The hyphenated name is a technique again: exactly the steps whose trajectory wrote it move to it.
    hyphenated = [
        e for e in graph.export.examples if "Shared-memory tiling" in (e.source_label, e.target_label)
    ]
    assert hyphenated
    for e in hyphenated:
        source = "Shared-memory tiling" if e.source_label == "Shared-memory tiling" else e.source
        target = "Shared-memory tiling" if e.target_label == "Shared-memory tiling" else e.target
        moved = get(api_url, graph, f"/v1/examples/{e.id}").json()
        assert (moved["source"], moved["target"]) == (source, target)
    back = get(
        api_url, graph, "/v1/examples", source="Parallelization", target="Shared-memory tiling"
    ).json()["items"]
    assert sorted(e["id"] for e in back) == sorted(
        e.id for e in hyphenated if e.source == "Parallelization" and e.target_label == "Shared-memory tiling"
    )
    again = post(api_url, graph, f"/v1/relabel-decisions/{hyphen['id']}/undo", {})
    assert again.status_code == 409 and error_type(again) == "conflict"
    assert get(api_url, graph, "/v1/relabel-decisions", outcome="merged").json()["items"] == []
    assert (
        len(
            get(api_url, graph, "/v1/relabel-decisions", outcome="merged", include_undone=True).json()[
                "items"
            ]
        )
        == 1
    )
    assert post(api_url, graph, "/v1/relabel-decisions/nope/undo", {}).status_code == 404


def test_export_and_import_refusals_write_nothing(api_url: str, graph: SeededGraph) -> None:
    exported = get(api_url, graph, "/v1/graph/export", Role.ADMIN)
    assert exported.status_code == 200
    document = GraphExport.model_validate(exported.json())
    assert document.model_dump(exclude={"exported_at"}) == graph.export.model_dump(exclude={"exported_at"})

    into_full = post(api_url, graph, "/v1/graph/import", exported.json(), Role.ADMIN)
    assert into_full.status_code == 409 and error_type(into_full) == "conflict"
    broken = exported.json()
    broken["transitions"][0]["source"] = "Nowhere"
    inconsistent = post(api_url, graph, "/v1/graph/import", broken, Role.ADMIN)
    assert inconsistent.status_code == 400 and "Nowhere" in inconsistent.json()["error"]["message"]
    malformed = post(api_url, graph, "/v1/graph/import", {"format": "regraph.graph/v0"}, Role.ADMIN)
    assert malformed.status_code == 422
    after = get(api_url, graph, "/v1/graph/export", Role.ADMIN).json()
    assert GraphExport.model_validate(after).model_dump(exclude={"exported_at"}) == document.model_dump(
        exclude={"exported_at"}
    )


def test_export_import_round_trip_over_http_is_exact(
    api_url: str, graph: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    exported = get(api_url, graph, "/v1/graph/export", Role.ADMIN).json()
    # A fresh deployment keeps its keys (the admin's included) but holds no graph content.
    neo4j_driver.execute_query(
        "MATCH (n) WHERE n:Technique OR n:Example OR n:RelabelDecision OR n:Trajectory DETACH DELETE n",
        database_=neo4j_target.database,
    )
    imported = post(api_url, graph, "/v1/graph/import", exported, Role.ADMIN)
    assert imported.status_code == 200, imported.text
    assert imported.json()["examples"] == len(graph.export.examples)
    again = get(api_url, graph, "/v1/graph/export", Role.ADMIN).json()
    exported.pop("exported_at")
    again.pop("exported_at")
    # The same graph; its audit log as exported plus the import itself (issue 27).
    before, after = exported.pop("audit"), again.pop("audit")
    assert [a for a in after if a in before] == before
    assert [(a["action"], a["actor"]) for a in after if a not in before] == [("graph.import", "test-admin")]
    assert again == exported


def test_keys_are_created_once_and_revocable(api_url: str, graph: SeededGraph) -> None:
    created = post(api_url, graph, "/v1/keys", {"name": "ci-bot", "role": "curator"}, Role.ADMIN)
    assert created.status_code == 201, created.text
    key = created.json()
    assert key["token"].startswith("rg_") and key["created_by"] == "test-admin"
    headers = {"Authorization": f"Bearer {key['token']}"}
    made = httpx.post(f"{api_url}/v1/techniques", headers=headers, json={"name": "Kernel fusion"})
    assert made.status_code == 201 and made.json()["created_by"] == "ci-bot"
    listed = get(api_url, graph, "/v1/keys", Role.ADMIN).json()
    assert {k["name"] for k in listed} == {"test-reader", "test-curator", "test-admin", "ci-bot"}
    assert all("token" not in k and "key_hash" not in k for k in listed)
    assert (
        post(api_url, graph, "/v1/keys", {"name": "ci-bot", "role": "reader"}, Role.ADMIN).status_code == 409
    )
    assert (
        post(api_url, graph, "/v1/keys", {"name": "bad name!", "role": "reader"}, Role.ADMIN).status_code
        == 422
    )
    revoked = post(api_url, graph, f"/v1/keys/{key['id']}/revoke", {}, Role.ADMIN)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert httpx.get(f"{api_url}/v1/techniques", headers=headers).status_code == 401


def test_openapi_declares_each_routes_errors(api_url: str) -> None:
    spec = httpx.get(f"{api_url}/openapi.json").json()
    paths = spec["paths"]
    assert {"401", "403", "404", "409"} <= set(paths["/v1/techniques/{name}"]["patch"]["responses"])
    assert "404" in paths["/v1/retrieve"]["post"]["responses"]
    assert "413" in paths["/v1/graph/import"]["post"]["responses"]
    assert "ErrorEnvelope" in str(paths["/v1/cypher"]["post"]["responses"]["400"])
    schemes = spec["components"]["securitySchemes"]
    assert {s["type"] for s in schemes.values()} == {"apiKey", "http"}


def test_unavailable_after_clear_is_not_a_crash(
    api_url: str, graph: SeededGraph, neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    # With every key gone, the same token is simply unknown.
    clear(neo4j_driver, neo4j_target)
    response = get(api_url, graph, "/v1/techniques")
    assert response.status_code == 401 and error_type(response) == "unauthorized"
