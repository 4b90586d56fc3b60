"""A small real reasoning graph for the graph API tests, and the API serving it.

The graph is built once per test session with the real construction pipeline (relabeling, real
all-MiniLM-L6-v2 embeddings) from benchmark trajectories, plus a few examples carrying verified
speedups (this machine has no GPU, so they are written the way the construction writes validated
steps). It is exported once; `restore` reloads that export before each test that changes the graph,
and `seed_graph` restores it for every module after the first (the build is the same each time).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from graphdb.connection import Neo4jTarget
from graphdb.models import (
    ApiKey,
    Example,
    GraphExport,
    IngestBatch,
    RelabelDecision,
    RelabelOutcome,
    ReviewStatus,
    Role,
    StepVerdict,
    Technique,
    content_id,
    utc_now,
)
from graphdb.store import Neo4jGraphStore
from search.embeddings import Embedder, shared_embedder
from search.relabel.construction import BuildSummary, GraphBuilder, TaskDirectoryReferences, read_trajectories
from search.relabel.relabeler import Relabeler
from tests.conftest import CLEAR_GRAPH
from tests.support.servers import serve_in_thread

ROOT = Path(__file__).resolve().parents[3]
TASKS = ROOT / "regraph_data" / "tasks"
TRAJECTORIES = ROOT / "bench" / "trajectories"
SEED_TASKS = [
    "gemm_f32",
    "conv2d_3x3_f32",
    "jacobi2d_5pt_f32",
    "csr_spmv_f32",
    "gemv_rowmajor_f32",
    "knn_dist_f32",
]
TILING = "Shared memory tiling"
# A name the relabeler kept apart for a curator, next to the technique it resembles (see seed_graph).
FLAGGED_NAME = "Coalesce each warp's loads"
FLAGGED_NEAR = "Memory coalescing"
MAX_REQUEST_BYTES = 20_000_000
RESTORE_KEYS = "UNWIND $rows AS row CREATE (k:ApiKey) SET k = row"


@dataclass
class SeededGraph:
    """The seeded graph's export, the build summary, and one API token per role."""

    export: GraphExport
    summary: BuildSummary
    tokens: dict[Role, str]
    measured: list[Example]
    keys: list[ApiKey]  # not in the export (keys are not the graph's): restored on their own

    def headers(self, role: Role) -> dict[str, str]:
        """Request headers authenticating as the seeded key of `role`."""
        return {"X-API-Key": self.tokens[role]}


def steps(task: str) -> list[dict[str, str]]:
    """The steps of a task's benchmark trajectory."""
    line = (TRAJECTORIES / f"{task}.jsonl").read_text().splitlines()[0]
    result: list[dict[str, str]] = json.loads(line)["steps"]
    return result


def measured_examples(embedder: Embedder) -> list[Example]:
    """Steps out of shared-memory tiling with verdicts and speedups, as a validated build records them."""
    gemm, knn = steps("gemm_f32"), steps("knn_dist_f32")
    rows = [
        # (task, code before, code after, target, verdict, speedup over the previous step, status)
        (
            "gemm_f32",
            gemm[1]["code"],
            gemm[2]["code"],
            "Thread coarsening",
            StepVerdict.PASSED,
            1.8,
            ReviewStatus.APPROVED,
        ),
        (
            "gemm_f32",
            gemm[1]["code"],
            gemm[3]["code"],
            "Register tiling",
            StepVerdict.PASSED,
            2.6,
            ReviewStatus.APPROVED,
        ),
        (
            "knn_dist_f32",
            knn[1]["code"],
            knn[2]["code"],
            "Loop unrolling",
            StepVerdict.PASSED,
            1.3,
            ReviewStatus.PENDING,
        ),
        (
            "knn_dist_f32",
            knn[1]["code"],
            knn[4]["code"],
            "Vectorized memory access",
            StepVerdict.FAILED,
            None,
            ReviewStatus.REJECTED,
        ),
    ]
    vectors = embedder.embed_code([r[1] for r in rows])
    return [
        Example(
            id=content_id("measured", task, before, after),
            source=TILING,
            target=target,
            task_id=task,
            think=f"measured step {target}",
            detail="",
            code_before=before,
            code_after=after,
            code_embedding=vector,
            source_label=TILING,
            target_label=target,
            speedup=speedup,
            speedup_over_serial=speedup * 10 if speedup else None,
            verdict=verdict,
            model="human-expert",
            review_status=status,
            review_reason="validation failed" if verdict is StepVerdict.FAILED else "",
            created_at=utc_now(),
        )
        for (task, before, after, target, verdict, speedup, status), vector in zip(rows, vectors, strict=True)
    ]


def clear(driver: Driver, target: Neo4jTarget) -> None:
    """Empty the graph (the schema bookkeeping stays)."""
    with driver.session(database=target.database) as session:
        session.run(CLEAR_GRAPH).consume()


_built: dict[tuple[int, str, str], SeededGraph] = {}


def seed_graph(driver: Driver, target: Neo4jTarget) -> SeededGraph:
    """The seeded graph in the database: built from scratch and exported on the first call for this
    server, restored exactly from that export on the later ones (other modules of the session)."""
    key = (id(driver), target.uri, target.database)
    if key not in _built:
        _built[key] = build_seed_graph(driver, target)
    else:
        restore(driver, target, _built[key])
    return _built[key]


def build_seed_graph(driver: Driver, target: Neo4jTarget) -> SeededGraph:
    """Build the seeded graph from scratch and export it."""
    clear(driver, target)
    store = Neo4jGraphStore(driver, target.database)
    embedder = shared_embedder()
    builder = GraphBuilder(
        store=store,
        embedder=embedder,
        relabeler=Relabeler(store, embedder),
        references=TaskDirectoryReferences(TASKS),
    )
    summary = builder.build(read_trajectories([TRAJECTORIES / f"{t}.jsonl" for t in SEED_TASKS]))
    measured = measured_examples(embedder)
    store.ingest(IngestBatch(examples=measured, actor="gpu-validation"))
    # On the taxonomy every method name of these trajectories is a known name or alias, so nothing is
    # left for a curator; the curation routes need a flagged name kept apart as its own technique,
    # written here as construction records one.
    description = "load the elements a warp reads in one transaction"
    store.ingest(
        IngestBatch(
            new_techniques=[
                Technique(
                    name=FLAGGED_NAME,
                    description=description,
                    embedding=embedder.embed_one(f"{FLAGGED_NAME}: {description}"),
                    created_at=utc_now(),
                    created_by="relabel",
                )
            ],
            decisions=[
                RelabelDecision(
                    id="test-flagged-decision",
                    candidate=FLAGGED_NAME,
                    candidate_description=description,
                    matched=FLAGGED_NEAR,
                    score=0.71,
                    outcome=RelabelOutcome.FLAGGED,
                    technique=FLAGGED_NAME,
                    decided_by="model",
                    at=utc_now(),
                )
            ],
        )
    )
    tokens = {role: store.create_api_key(f"test-{role.value}", role, actor="bootstrap")[1] for role in Role}
    return SeededGraph(
        export=store.export_graph(),
        summary=summary,
        tokens=tokens,
        measured=measured,
        keys=store.list_api_keys(),
    )


def restore(driver: Driver, target: Neo4jTarget, seeded: SeededGraph) -> None:
    """Put the seeded graph back exactly as exported."""
    clear(driver, target)
    Neo4jGraphStore(driver, target.database).import_graph(seeded.export, actor="test")
    # An import creates no keys and records itself: put the keys back and drop that record.
    rows = [{**k.model_dump(), "role": k.role.value} for k in seeded.keys]
    with driver.session(database=target.database) as session:
        session.run(RESTORE_KEYS, rows=rows).consume()
        session.run("MATCH (a:AuditEntry {action: 'graph.import', actor: 'test'}) DELETE a").consume()


def api_settings(target: Neo4jTarget, data_dir: Path, **overrides: object) -> ApiSettings:
    """API settings against the session's Neo4j (no seed graph unless asked: tests bring their own)."""
    overrides.setdefault("seed_graph", None)
    overrides.setdefault("max_request_bytes", MAX_REQUEST_BYTES)
    return ApiSettings(
        neo4j_uri=target.uri,
        neo4j_password=SecretStr(target.password),
        data_dir=data_dir,
        log_format="text",
        **overrides,  # type: ignore[arg-type]
    )


def serve(target: Neo4jTarget, data_dir: Path, **overrides: object) -> Iterator[str]:
    """Serve the API (real uvicorn on loopback) until the generator is closed."""
    with serve_in_thread(create_app(api_settings(target, data_dir, **overrides))) as url:
        yield url
