"""A bounded property-based fuzz run of the HTTP API (schemathesis) against the real app on loopback.

Every operation of the API's own OpenAPI document (`/v1/...`, `/healthz`, `/readyz`) gets generated
requests, valid and invalid, sent over real HTTP to uvicorn over the session's embedded Neo4j (the
committed seed graph loaded), each with a key drawn from a reader's and a curator's. Two properties must
hold for every answer: no server error (5xx other than a documented 503) and no status code the
document does not declare for that operation. Neither key may manage keys, so the run cannot revoke
the keys it uses. Jobs get the replay backend as their model (a stand-in for the LLM) and an
executor address where nothing listens, so a fuzzed job that is accepted fails at its first
evaluation instead of compiling.

The run is bounded (a fixed number of examples per operation, derandomized, no shrinking) so it
stays within about a minute on two cores; `REGRAPH_FUZZ_EXAMPLES` raises it for a longer hunt.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from neo4j import Driver
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error, status_code_conformance

from api.settings import default_seed_graph
from graphdb.connection import Neo4jTarget
from graphdb.embedded import free_port
from graphdb.export import import_from_file
from graphdb.models import Role
from graphdb.store import Neo4jGraphStore
from search.backends.config import ModelRoles, RoleConfig
from search.backends.replay import records_from_trajectories, write_replay
from tests.integration.api.graph_support import clear, serve

TRAJECTORY = Path(__file__).resolve().parents[3] / "bench" / "trajectories" / "mandelbrot_q28_i32.jsonl"
EXAMPLES = int(os.environ.get("REGRAPH_FUZZ_EXAMPLES", "3"))  # per operation and mode (valid, invalid)
# Left out: the duplicate finder scores every pair of techniques with the relabeler's model, 5-8 s a
# call on the seed graph here and over 30 s for the first (which loads the model); even an "invalid"
# request (an unknown extra parameter) runs it. Its parameters are plain bounded numbers.
# /readyz: this stack's executor address has nothing behind it, so readiness is a 503 naming the
# executor whatever the request (checked on its own below).
LEFT_OUT = {"GET /v1/technique-duplicates", "GET /readyz"}
REQUEST_TIMEOUT_S = 30.0
# The API's own routes; /ui (HTML pages, tested by the browser tests) and /mcp are other faces.
API_PATHS = r"^/(v1/|healthz$|readyz$)"


@dataclass(frozen=True)
class Finding:
    """One answer that broke a property: who asked, what, and what came back."""

    role: str
    operation: str
    mode: str
    problem: str

    def __str__(self) -> str:
        return f"[{self.role}, {self.mode}] {self.operation}: {self.problem}"


@pytest.fixture(scope="module")
def tokens(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> dict[Role, str]:
    """The seed graph and a fresh reader and curator key (neither may revoke keys)."""
    clear(neo4j_driver, neo4j_target)
    store = Neo4jGraphStore(neo4j_driver, neo4j_target.database)
    import_from_file(store, default_seed_graph(), actor="fuzz")
    return {
        role: store.create_api_key(f"fuzz-{role.value}", role, actor="bootstrap")[1]
        for role in (Role.READER, Role.CURATOR)
    }


@pytest.fixture(scope="module")
def api_url(
    neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory, tokens: dict[Role, str]
) -> Iterator[str]:
    data_dir = Path(tmp_path_factory.mktemp("fuzz"))
    replay = data_dir / "generator.replay.jsonl"
    write_replay(records_from_trajectories(TRAJECTORY.read_text().splitlines()), replay)
    yield from serve(
        neo4j_target,
        data_dir,
        cypher_timeout_s=3.0,
        preload_retrieval=False,
        max_request_bytes=200_000,
        models=ModelRoles(generator=RoleConfig(backend="replay", replay_path=replay)),
        executor_url=f"http://127.0.0.1:{free_port()}",
    )


def fuzz_operation(
    url: str,
    operation: schemathesis.APIOperation,
    mode: GenerationMode,
    tokens: dict[Role, str],
    examples: int,
) -> tuple[list[Finding], int]:
    """Send generated requests (valid or invalid, per `mode`) to one operation, each with a key drawn
    from `tokens`; return what broke a property and how many requests were sent."""
    findings: list[Finding] = []
    sent = 0

    @given(case=operation.as_strategy(generation_mode=mode), role=st.sampled_from(sorted(tokens)))
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: report, don't minimise
        suppress_health_check=list(HealthCheck),
    )
    def send(case: schemathesis.Case, role: Role) -> None:
        nonlocal sent
        sent += 1
        headers = {**(case.headers or {}), "X-API-Key": tokens[role]}
        finding = partial(Finding, role.value, operation.label, mode.value)
        try:
            response = case.call(base_url=url, headers=headers, timeout=REQUEST_TIMEOUT_S)
        except requests.RequestException as e:  # no answer in time, or the connection dropped
            findings.append(finding(f"no answer: {type(e).__name__}"))
            return
        try:
            case.validate_response(response, checks=[not_a_server_error, status_code_conformance])
        except (AssertionError, BaseExceptionGroup) as failure:  # keep going, report them all
            problem = f"{response.status_code} {response.text[:300]!r}: {failure}"
            findings.append(finding(problem.replace("\n", " ")[:800]))

    with contextlib.suppress(Unsatisfiable):  # nothing to make invalid (no parameters, no body)
        send()
    return findings, sent


def test_fuzzed_requests_get_no_server_error_and_only_documented_statuses(
    api_url: str, tokens: dict[Role, str]
) -> None:
    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json").include(path_regex=API_PATHS)
    findings: list[Finding] = []
    sent = 0
    for result in schema.get_all_operations():
        if result.ok().label in LEFT_OUT:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            found, count = fuzz_operation(api_url, result.ok(), mode, tokens, EXAMPLES)
            findings += found
            sent += count
    # The run must not have broken the server for everyone else.
    assert httpx.get(f"{api_url}/healthz", timeout=10).status_code == 200
    not_ready = httpx.get(f"{api_url}/readyz", timeout=10)
    assert not_ready.status_code == 503 and "the executor at" in not_ready.text
    assert sent >= 150, f"the fuzz run sent only {sent} requests"
    unique = sorted({str(f) for f in findings})
    assert not unique, f"{len(unique)} findings in {sent} requests:\n" + "\n".join(unique)
