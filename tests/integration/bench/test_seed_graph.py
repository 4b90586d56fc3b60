"""The committed seed graph: it parses, matches its README, holds no evaluation task, loads into an empty
graph (re-exporting gives the same content), and an API started on an empty database serves it."""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings, default_seed_graph
from api.state import load_seed_graph
from bench.seed_graph import ExportLeakError, check_no_leakage, export_text
from bench.split import REPO_ROOT, load_bench_tasks, read_split
from graphdb.connection import Neo4jTarget
from graphdb.export import read_export
from graphdb.models import GraphExport, Technique, utc_now
from graphdb.store import Neo4jGraphStore
from search.protocols import INITIAL_TECHNIQUE
from tests.conftest import CLEAR_GRAPH
from tests.support.servers import serve_in_thread

SEED = default_seed_graph()
README = SEED.parent / "README.md"
CONVERGENCE = SEED.parent / "convergence.csv"


@pytest.fixture(scope="module")
def seed() -> GraphExport:
    return read_export(SEED)


@pytest.fixture()
def empty_graph(clean_graph: Driver, neo4j_target: Neo4jTarget) -> Iterator[Driver]:
    """An empty graph, emptied again afterwards so that the seed does not linger in the session database."""
    yield clean_graph
    with clean_graph.session(database=neo4j_target.database) as session:
        session.run(CLEAR_GRAPH).consume()


def _without_time(export: GraphExport) -> dict[str, object]:
    dump = export.model_dump(exclude={"exported_at"})
    # An import records itself in the audit log (issue 27): the loaded graph's log has that entry too.
    dump["audit"] = [a for a in dump["audit"] if a["action"] != "graph.import"]
    return dump


def test_the_committed_file_is_the_export_as_written(seed: GraphExport) -> None:
    # The committed text is exactly what `bench.seed_graph` writes for this export (stable, one record a line).
    assert SEED.read_text(encoding="utf-8") == export_text(seed)
    assert seed.api_keys == []  # a seed must never ship credentials


def test_sizes_match_the_readme_and_the_convergence_table(seed: GraphExport) -> None:
    readme = README.read_text(encoding="utf-8")
    sizes = {name: int(n) for name, n in re.findall(r"^\| ([A-Za-z ]+) \| (\d+) \|$", readme, flags=re.M)}
    assert sizes["techniques"] == len(seed.techniques)
    assert sizes["transitions"] == len(seed.transitions)
    assert sizes["examples"] == len(seed.examples)
    assert sizes["trajectories"] == len(seed.trajectories)
    assert sizes["relabel decisions"] == len(seed.decisions)
    assert sizes["examples with a GPU verdict"] == sum(1 for e in seed.examples if e.verdict is not None)
    for technique in seed.techniques:
        assert f"| {technique.name.replace('|', chr(92) + '|')} |" in readme
    with CONVERGENCE.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert int(rows[-1]["trajectories"]) == len(seed.trajectories)
    assert (int(rows[-1]["techniques"]), int(rows[-1]["transitions"]), int(rows[-1]["examples"])) == (
        len(seed.techniques),
        len(seed.transitions),
        len(seed.examples),
    )
    # The curve only grows: a trajectory never removes a technique or a transition.
    for before, after in itertools.pairwise(rows):
        assert int(after["techniques"]) >= int(before["techniques"])
        assert int(after["transitions"]) >= int(before["transitions"])


def test_no_evaluation_task_is_in_the_seed(seed: GraphExport) -> None:
    split = read_split()
    build, evaluation = set(split.build), set(split.eval)
    assert {e.task_id for e in seed.examples} <= build
    assert {t.task_id for t in seed.trajectories} <= build
    assert not ({e.task_id for e in seed.examples} & evaluation)
    tasks, _ = load_bench_tasks()
    # Ids anywhere in the text, and exact or near-duplicate code of the evaluation tasks.
    check_no_leakage(
        seed,
        SEED.read_text(encoding="utf-8"),
        build,
        [t for t in tasks if t.id in evaluation],
        split.near_duplicate_jaccard,
    )


def test_the_leakage_check_catches_an_evaluation_task(seed: GraphExport) -> None:
    split = read_split()
    tasks, _ = load_bench_tasks()
    evaluation = [t for t in tasks if t.id in set(split.eval)]
    reference = (REPO_ROOT / "regraph_data" / "tasks" / evaluation[0].id / "reference.cpp").read_text(
        encoding="utf-8"
    )
    example = seed.examples[0]
    cases = {
        "task id": example.model_copy(update={"task_id": evaluation[0].id}),
        # The evaluation task's code under a building task's id, with a comment changed: a near duplicate.
        "code": example.model_copy(update={"code_after": reference.replace("//", "// copied:", 1)}),
    }
    for case, leaked in cases.items():
        export = seed.model_copy(update={"examples": [leaked], "trajectories": [], "techniques": []})
        text = export_text(export)
        with pytest.raises(ExportLeakError, match=evaluation[0].id):
            check_no_leakage(export, text, set(split.build), evaluation, split.near_duplicate_jaccard)
            pytest.fail(f"a leaked {case} was not caught")


def test_the_seed_imports_into_an_empty_graph_and_exports_the_same(
    seed: GraphExport, empty_graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    store = Neo4jGraphStore(empty_graph, neo4j_target.database)
    loaded = load_seed_graph(store, SEED)
    assert loaded is not None
    assert store.counts() == {
        "techniques": len(seed.techniques),
        "transitions": len(seed.transitions),
        "examples": len(seed.examples),
    }
    assert _without_time(store.export_graph()) == _without_time(seed)
    # The indexes serve the imported records: retrieval from the initial node, technique search.
    first_steps = store.successors(INITIAL_TECHNIQUE, seed.examples[0].code_embedding or [], 2)
    assert first_steps and all(s.examples for s in first_steps)
    tiling = next(t for t in seed.techniques if t.name == "Shared memory tiling")
    assert store.nearest_techniques(tiling.embedding or [], 1)[0].technique.name == tiling.name
    # A graph that has techniques is never seeded again.
    assert load_seed_graph(store, SEED) is None
    assert store.counts()["examples"] == len(seed.examples)


def _settings(target: Neo4jTarget, data_dir: Path, **overrides: object) -> ApiSettings:
    return ApiSettings(
        neo4j_uri=target.uri,
        neo4j_password=SecretStr(target.password),
        data_dir=data_dir,
        log_format="text",
        anonymous_read=True,
        **overrides,  # type: ignore[arg-type]
    )


def test_an_api_started_on_an_empty_graph_serves_the_seed(
    seed: GraphExport, empty_graph: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    settings = _settings(neo4j_target, tmp_path)
    assert settings.seed_graph == SEED  # the default
    with serve_in_thread(create_app(settings)) as url:
        response = httpx.get(f"{url}/v1/techniques", params={"limit": 1000}, timeout=30)
    assert response.status_code == 200
    assert [t["name"] for t in response.json()["items"]] == sorted(t.name for t in seed.techniques)


def test_an_api_leaves_a_graph_with_techniques_alone(
    empty_graph: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    store = Neo4jGraphStore(empty_graph, neo4j_target.database)
    store.create_technique(Technique(name="Loop unrolling", created_at=utc_now()), actor="test")
    with serve_in_thread(create_app(_settings(neo4j_target, tmp_path))) as url:
        response = httpx.get(f"{url}/v1/techniques", timeout=30)
    assert [t["name"] for t in response.json()["items"]] == ["Loop unrolling"]


@pytest.mark.parametrize("value", ["", "none", "None", " "])
def test_the_seed_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("REGRAPH_SEED_GRAPH", value)
    assert ApiSettings().seed_graph is None


def test_the_seed_path_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REGRAPH_SEED_GRAPH", str(tmp_path / "other.json"))
    assert ApiSettings().seed_graph == tmp_path / "other.json"
