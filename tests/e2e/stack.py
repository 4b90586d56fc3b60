"""The real stack behind the browser tests: the API on the session's Neo4j with the seed graph, the
real executor (compile-only here), the replay backend standing in for the LLM, and Debian's Chromium
driven by Playwright. Also used by docs/screenshots/take.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo4j import Driver
from playwright.sync_api import Browser, BrowserContext, Page, Playwright
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from executor.app import create_app as create_executor_app
from executor.settings import ExecutorSettings
from graphdb.connection import Neo4jTarget
from graphdb.models import (
    INITIAL_TECHNIQUE,
    Example,
    IngestBatch,
    RelabelDecision,
    RelabelOutcome,
    Role,
    Technique,
    content_id,
    utc_now,
)
from graphdb.store import Neo4jGraphStore
from search.backends.config import ModelRoles, RoleConfig
from search.backends.replay import records_from_trajectories, write_replay
from tests.support.servers import serve_in_thread

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CLEAR = "MATCH (n) WHERE NOT n:SchemaMigration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
JOB_TASK = "mandelbrot_q28_i32"


# A signed-in page for a role: `with signed_in(Role.CURATOR) as page: ...` (tests/e2e/conftest.py).
SignedIn = Callable[[Role], AbstractContextManager[Page]]


@dataclass
class Stack:
    """A running API over the seed graph with one key per role (name = role)."""

    url: str
    store: Neo4jGraphStore
    tokens: dict[Role, str]


def record_queued_name(store: Neo4jGraphStore, name: str, near: str) -> tuple[str, str, str]:
    """Record a name the relabeler left undecided, as construction does: its own technique with one
    example, a flagged decision whose best candidate is technique `near`, and code evidence.

    Returns the decision's id, the name and its example's id.
    """
    tag = content_id("queued", name)[:8]
    example = Example(
        id=content_id("e2e-queue", name),
        source=INITIAL_TECHNIQUE,
        target=name,
        task_id="e2e_task",
        code_before="__global__ void k(float* a) { a[threadIdx.x] = 0.f; }\n",
        code_after="__global__ void k(float* a) { __shared__ float s[32]; s[threadIdx.x] = 0.f; }\n",
        created_at=utc_now(),
        source_label=INITIAL_TECHNIQUE,
        target_label=name,
    )
    decision = RelabelDecision(
        id=f"e2e-{tag}",
        candidate=name,
        candidate_description="stage each block's loads through shared memory",
        matched=near,
        score=0.7,
        outcome=RelabelOutcome.FLAGGED,
        technique=name,
        decided_by="model",
        at=utc_now(),
        evidence={
            "candidates": [
                {"technique": near, "probability": 0.61, "features": {"name_sim": 0.72, "text_sim": 0.64}}
            ],
            "code": {
                "introduced": ["shared_memory"],
                "removed": [],
                "present_after": ["shared_memory"],
                "parsed": True,
            },
        },
    )
    store.ingest(
        IngestBatch(
            new_techniques=[Technique(name=name, created_at=utc_now())],
            examples=[example],
            decisions=[decision],
        )
    )
    return decision.id, name, example.id


def write_job_replay(directory: Path) -> Path:
    """Replayed model answers for JOB_TASK, from its teacher trajectory."""
    path = directory / f"{JOB_TASK}.replay.jsonl"
    trajectory = ROOT / "bench" / "trajectories" / f"{JOB_TASK}.jsonl"
    write_replay(
        records_from_trajectories(trajectory.read_text().splitlines(), one_shot_from_final=True), path
    )
    return path


@contextmanager
def running_stack(driver: Driver, target: Neo4jTarget, workdir: Path, **overrides: Any) -> Iterator[Stack]:
    """Empty the graph, start the executor and the API (which loads the seed graph), add the keys."""
    with driver.session(database=target.database) as session:
        session.run(CLEAR).consume()
    # no spare reference worker: one would start with the stack and after each evaluation, mostly unused
    executor_settings = ExecutorSettings(
        cache_dir=workdir / "executor-cache", runtime="none", prewarm_workers=False
    )
    with serve_in_thread(create_executor_app(executor_settings)) as executor_url:
        settings = ApiSettings(
            neo4j_uri=target.uri,
            neo4j_password=SecretStr(target.password),
            data_dir=workdir / "api-data",
            log_format="text",
            log_level="WARNING",
            executor_url=executor_url,
            models=ModelRoles(generator=RoleConfig(backend="replay", replay_path=write_job_replay(workdir))),
            preload_retrieval=False,
            **overrides,
        )
        with serve_in_thread(create_app(settings), startup_timeout_s=600) as url:
            store = Neo4jGraphStore(driver, target.database)
            tokens = {role: store.create_api_key(role.value, role, actor="e2e")[1] for role in Role}
            yield Stack(url=url, store=store, tokens=tokens)


@contextmanager
def chromium(playwright: Playwright) -> Iterator[Browser]:
    """Debian's Chromium, headless (Playwright's own browser download is not used)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
    try:
        yield browser
    finally:
        browser.close()


@contextmanager
def fresh_context(browser: Browser, **options: Any) -> Iterator[BrowserContext]:
    """A browser context with nothing stored (each its own cookies)."""
    # Each launch already runs on a fresh temporary profile; each context has its own cookie jar.
    context = browser.new_context(viewport={"width": 1400, "height": 900}, **options)
    try:
        yield context
    finally:
        context.close()


def sign_in(page: Page, url: str, token: str) -> None:
    """Sign in through the form and land on the review queue."""
    page.goto(f"{url}/ui/login")
    page.fill("#key", token)
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/queue**")
