"""The relabel review queue and likely duplicates over real HTTP, on a graph built by the real pipeline.

The graph is seeded with a four-technique taxonomy (a file, chosen with REGRAPH_TAXONOMY as a team
would) and built from one benchmark trajectory whose step names were changed: one names an intrinsic
its code never calls (flagged into the queue).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from neo4j import Driver

from api.app import create_app
from graphdb.connection import Neo4jTarget
from graphdb.models import ReviewStatus, Role, Technique, utc_now
from graphdb.store import Neo4jGraphStore
from search.embeddings import shared_embedder, technique_text
from search.relabel.construction import GraphBuilder, SourcedTrajectory, TaskDirectoryReferences, Trajectory
from search.relabel.relabeler import Relabeler
from search.relabel.taxonomy import default_taxonomy, load_taxonomy
from tests.integration.api.graph_support import TASKS, TRAJECTORIES, api_settings, clear
from tests.support.servers import serve_in_thread

# Building the graph embeds code and labels: give a loaded shared machine room (it takes seconds idle).
pytestmark = pytest.mark.timeout(1200)
TIMEOUT = 300

KEEP = ["Parallelization", "Shared memory tiling", "Thread coarsening", "Loop unrolling"]
FLAGGED_NAME = "Tiles read through __ldg"


@pytest.fixture(scope="module")
def taxonomy_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A small taxonomy file, named by REGRAPH_TAXONOMY while the module runs."""
    document = default_taxonomy().to_json()
    document["techniques"] = [t for t in document["techniques"] if t["name"] in KEEP]
    path = tmp_path_factory.mktemp("taxonomy") / "taxonomy.json"
    path.write_text(json.dumps(document))
    previous = os.environ.get("REGRAPH_TAXONOMY")
    os.environ["REGRAPH_TAXONOMY"] = str(path)
    yield path
    if previous is None:
        del os.environ["REGRAPH_TAXONOMY"]
    else:
        os.environ["REGRAPH_TAXONOMY"] = previous


@pytest.fixture(scope="module")
def built(neo4j_driver: Driver, neo4j_target: Neo4jTarget, taxonomy_file: Path) -> dict[Role, str]:
    """Build the graph once; return one API token per role."""
    # step 1: shared-memory tiling code, no __ldg in it
    return build_with_names(neo4j_driver, neo4j_target, taxonomy_file, {1: FLAGGED_NAME})


def build_with_names(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget, taxonomy_file: Path, names: dict[int, str]
) -> dict[Role, str]:
    """A graph of gemm_f32's first trajectory (3 steps), step i's method renamed `names[i]`; one API
    token per role."""
    clear(neo4j_driver, neo4j_target)
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    embedder = shared_embedder()
    taxonomy = load_taxonomy(taxonomy_file)
    line = (TRAJECTORIES / "gemm_f32.jsonl").read_text().splitlines()[0]
    raw = json.loads(line)
    raw["steps"] = raw["steps"][:3]
    for step, name in names.items():
        raw["steps"][step]["method"] = name
    builder = GraphBuilder(
        store=store,
        embedder=embedder,
        relabeler=Relabeler(store, embedder, taxonomy=taxonomy),
        references=TaskDirectoryReferences(TASKS),
        seed_taxonomy=taxonomy,
    )
    summary = builder.build([SourcedTrajectory(Trajectory.model_validate(raw), "test")])
    assert summary.trajectories_ingested == 1
    return {role: store.create_api_key(f"test-{role.value}", role, actor="bootstrap")[1] for role in Role}


@pytest.fixture(scope="module")
def api_url(
    neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory, taxonomy_file: Path
) -> Iterator[str]:
    settings = api_settings(neo4j_target, Path(tmp_path_factory.mktemp("relabel-api")))
    with serve_in_thread(create_app(settings), startup_timeout_s=900) as url:
        yield url


def _headers(tokens: dict[Role, str], role: Role) -> dict[str, str]:
    return {"X-API-Key": tokens[role]}


def test_the_queue_shows_the_evidence_and_a_merge_moves_the_examples(
    api_url: str, built: dict[Role, str], neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    reader, curator = _headers(built, Role.READER), _headers(built, Role.CURATOR)
    queue = httpx.get(f"{api_url}/v1/relabel-queue", headers=reader, timeout=120).json()
    assert queue["total"] == len(queue["items"]) >= 1
    item = next(i for i in queue["items"] if i["candidate"] == FLAGGED_NAME)
    assert any(f.startswith("name_code_mismatch") and "__ldg" in f for f in item["flags"])
    assert item["code"]["parsed"] and "shared_memory" in item["code"]["introduced"]
    assert item["detail"]

    # Readers cannot resolve; unknown ids and techniques are 404; the initial node is refused.
    assert (
        httpx.post(
            f"{api_url}/v1/relabel-queue/{item['id']}/accept", headers=reader, timeout=TIMEOUT
        ).status_code
        == 403
    )
    assert (
        httpx.post(f"{api_url}/v1/relabel-queue/nope/accept", headers=curator, timeout=TIMEOUT).status_code
        == 404
    )
    missing = httpx.post(
        f"{api_url}/v1/relabel-queue/{item['id']}/merge",
        headers=curator,
        json={"into": "Nope"},
        timeout=TIMEOUT,
    )
    assert missing.status_code == 404 and missing.json()["error"]["code"] == 404
    initial = httpx.post(
        f"{api_url}/v1/relabel-queue/{item['id']}/merge",
        headers=curator,
        json={"into": "sequential code"},
        timeout=TIMEOUT,
    )
    assert initial.status_code == 400

    moved = httpx.post(
        f"{api_url}/v1/relabel-queue/{item['id']}/merge",
        headers=curator,
        json={"into": "Loop unrolling"},
        timeout=TIMEOUT,
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["resolution"] == "merged:Loop unrolling"
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    examples = store.list_examples(status=ReviewStatus.PENDING, limit=100)
    step = next(e for e in examples if e.target_label == FLAGGED_NAME)
    assert step.target == "Loop unrolling"
    assert FLAGGED_NAME in store.get_technique("Loop unrolling").aliases
    after = httpx.get(f"{api_url}/v1/relabel-queue", headers=reader, timeout=TIMEOUT).json()
    assert item["id"] not in {i["id"] for i in after["items"]}
    again = httpx.post(f"{api_url}/v1/relabel-queue/{item['id']}/accept", headers=curator, timeout=TIMEOUT)
    assert again.status_code == 409


def test_likely_duplicates_rank_a_duplicate_first_and_merge_in_one_call(
    api_url: str, built: dict[Role, str], neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    embedder = shared_embedder()
    description = "each block stages tiles of the inputs in __shared__ arrays and reuses them"
    store.create_technique(
        Technique(
            name="Block tiles in on-chip shared memory",
            description=description,
            embedding=embedder.embed_one(technique_text("Block tiles in on-chip shared memory", description)),
            created_at=utc_now(),
        ),
        actor="test",
    )
    reader, curator = _headers(built, Role.READER), _headers(built, Role.CURATOR)
    pairs = httpx.get(f"{api_url}/v1/technique-duplicates", headers=reader, timeout=300).json()
    top = pairs["items"][0]
    assert {top["keep"], top["merge"]} == {"Shared memory tiling", "Block tiles in on-chip shared memory"}
    assert top["keep"] == "Shared memory tiling" and top["probability"] >= 0.5
    # A scorer pair goes both ways: the one technique is merged into the other, and the other's nearest
    # technique is the first (issue 28: a general technique is often nearest to one of its kinds).
    scorer_pairs = [p for p in pairs["items"] if p["probability"] < 1.0]
    assert scorer_pairs and all(
        any("is the technique nearest to" in reason for reason in p["reasons"]) for p in scorer_pairs
    ), scorer_pairs
    refused = httpx.post(
        f"{api_url}/v1/technique-duplicates/merge",
        headers=curator,
        json={"keep": "a", "merge": "a"},
        timeout=TIMEOUT,
    )
    assert refused.status_code == 400
    merged = httpx.post(
        f"{api_url}/v1/technique-duplicates/merge",
        headers=curator,
        json={"keep": top["keep"], "merge": top["merge"]},
        timeout=TIMEOUT,
    )
    assert merged.status_code == 200, merged.text
    assert "Block tiles in on-chip shared memory" in merged.json()["aliases"]
    assert (
        store.find_technique_by_label("Block tiles in on-chip shared memory").name == "Shared memory tiling"
    )  # type: ignore[union-attr]


def test_a_pair_kept_separate_leaves_the_likely_duplicates_until_undone(
    api_url: str, built: dict[Role, str], neo4j_driver: Driver, neo4j_target: Neo4jTarget
) -> None:
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    embedder = shared_embedder()
    first, second = "Warp-level reduction", "Warp level reduction"  # written alike: certain duplicates
    for name in (first, second):
        store.create_technique(
            Technique(
                name=name,
                description="lanes of a warp combine partial sums with __shfl_down_sync",
                embedding=embedder.embed_one(technique_text(name, "lanes combine partial sums")),
                created_at=utc_now(),
            ),
            actor="test",
        )
    reader, curator = _headers(built, Role.READER), _headers(built, Role.CURATOR)
    pair = {"first": first, "second": second}

    def listed() -> tuple[set[frozenset[str]], int]:
        answer = httpx.get(
            f"{api_url}/v1/technique-duplicates",
            params={"min_probability": 0.99, "limit": 1000},
            headers=reader,
            timeout=TIMEOUT,
        )
        assert answer.status_code == 200, answer.text
        body = answer.json()
        return {frozenset((p["keep"], p["merge"])) for p in body["items"]}, body["kept_separate"]

    assert listed() == ({frozenset(pair.values())}, 0)
    url = f"{api_url}/v1/technique-duplicates/keep-separate"
    assert httpx.post(url, headers=reader, json=pair, timeout=TIMEOUT).status_code == 403
    same = httpx.post(url, headers=curator, json={"first": first, "second": first}, timeout=TIMEOUT)
    assert same.status_code == 400 and same.json()["error"]["message"]
    unknown = httpx.post(url, headers=curator, json={"first": first, "second": "Nope"}, timeout=TIMEOUT)
    assert unknown.status_code == 404
    assert httpx.post(url, headers=curator, json={"first": first}, timeout=TIMEOUT).status_code == 422

    kept = httpx.post(url, headers=curator, json=pair, timeout=TIMEOUT)
    assert kept.status_code == 200, kept.text
    assert kept.json()["first"] == second and kept.json()["kept_by"] == "test-curator"
    assert listed() == (set(), 1)
    kept_list = httpx.get(f"{api_url}/v1/technique-duplicates/kept-separate", headers=reader, timeout=TIMEOUT)
    assert [(k["first"], k["second"]) for k in kept_list.json()["items"]] == [(second, first)]
    assert ("test-curator", "technique.keep_separate") in [
        (a.actor, a.action) for a in store.list_audit(target=f"technique:{second}")
    ]

    undo = f"{api_url}/v1/technique-duplicates/kept-separate/undo"
    assert httpx.post(undo, headers=reader, json=pair, timeout=TIMEOUT).status_code == 403
    assert httpx.post(undo, headers=curator, json=pair, timeout=TIMEOUT).json() == {"items": []}
    assert listed() == ({frozenset(pair.values())}, 0)
    assert httpx.post(undo, headers=curator, json=pair, timeout=TIMEOUT).status_code == 409
