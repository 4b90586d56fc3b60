"""``/v1/optimize`` end to end over real HTTP: the real API on the session's Neo4j (with a small graph
written through the graph store), the REAL executor service on loopback (compile-only here: runtime
``none``, so nothing is ever verified), and, standing in for the LLM, the replay backend built from a
teacher trajectory or the local OpenAI-compatible test server (to make a job wait on its model).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from executor.taskformat import load_task
from graphdb.connection import Neo4jTarget
from graphdb.jobs import JobStore
from graphdb.models import Example, IngestBatch, ReviewStatus, Role, Technique, content_id, utc_now
from graphdb.store import Neo4jGraphStore
from regraph_cli.optimize import parse_sse
from search.backends.config import ModelRoles, RoleConfig
from search.backends.replay import records_from_trajectories, teacher_answer, write_replay
from search.embeddings import shared_embedder
from search.engine import Candidate, SearchResult
from search.protocols import INITIAL_TECHNIQUE, Evaluation
from search.relabel.construction import GraphImprovements
from tests.support.jobs import follow_job, submit_job
from tests.support.openai_test_server import OpenAITestServer
from tests.support.servers import compile_only_executor, serve_in_thread

pytestmark = pytest.mark.neo4j

ROOT = Path(__file__).resolve().parents[3]
TASK_ID = "mandelbrot_q28_i32"
TASK_DIR = ROOT / "regraph_data" / "tasks" / TASK_ID
TRAJECTORY = ROOT / "bench" / "trajectories" / f"{TASK_ID}.jsonl"
OTHER_TRAJECTORY = ROOT / "bench" / "trajectories" / "game_of_life_u8.jsonl"
CLEAR = "MATCH (n) WHERE NOT n:SchemaMigration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"


def _trajectory(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text().splitlines()[0])
    return data


def _write_graph(driver: Driver, database: str) -> None:
    """sequential code -> Parallelization -> {Warp divergence reduction, Branch elimination}."""
    embedder = shared_embedder()
    own, other = _trajectory(TRAJECTORY), _trajectory(OTHER_TRAJECTORY)
    names = [INITIAL_TECHNIQUE, "Parallelization", "Warp divergence reduction", "Branch elimination"]
    vectors = embedder.embed(names)
    techniques = [
        Technique(name=n, embedding=v, created_at=utc_now(), created_by="test")
        for n, v in zip(names, vectors, strict=True)
    ]
    # Examples from another task's trajectory, plus the second step of this task's own.
    other_ref = (ROOT / "regraph_data" / "tasks" / "game_of_life_u8" / "reference.cpp").read_text()
    steps = [
        (INITIAL_TECHNIQUE, "Parallelization", "game_of_life_u8", other_ref, other["steps"][0]),
        (
            "Parallelization",
            "Branch elimination",
            "game_of_life_u8",
            other["steps"][0]["code"],
            other["steps"][1],
        ),
        ("Parallelization", "Warp divergence reduction", TASK_ID, own["steps"][0]["code"], own["steps"][1]),
    ]
    examples = [
        Example(
            id=content_id("example", task, before, step["code"]),
            source=source,
            target=target,
            task_id=task,
            think=step["think"],
            detail=step["detail"],
            code_before=before,
            code_after=step["code"],
            code_embedding=embedder.embed_code([before])[0],
            created_at=utc_now(),
        )
        for source, target, task, before, step in steps
    ]
    Neo4jGraphStore(driver, database).ingest(
        IngestBatch(new_techniques=techniques, examples=examples, actor="test")
    )


def _settings(target: Neo4jTarget, data_dir: Path, **overrides: Any) -> ApiSettings:
    overrides.setdefault("seed_graph", None)  # these tests bring their own graph
    overrides.setdefault("anonymous_read", True)  # auth is covered by test_optimize_requires_a_key
    return ApiSettings(
        neo4j_uri=target.uri,
        neo4j_password=SecretStr(target.password),
        data_dir=data_dir,
        log_format="text",
        max_request_bytes=300_000,
        **overrides,
    )


@pytest.fixture(scope="module")
def executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real executor, compile-only (no GPU runtime) whatever machine the test runs on."""
    with compile_only_executor(tmp_path_factory.mktemp("executor-cache")) as url:
        yield url


@pytest.fixture(scope="module")
def graph(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> Driver:
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(CLEAR).consume()
    _write_graph(neo4j_driver, neo4j_target.database)
    return neo4j_driver


@pytest.fixture(scope="module")
def replay_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "mandelbrot.replay.jsonl"
    write_replay(
        records_from_trajectories(TRAJECTORY.read_text().splitlines(), one_shot_from_final=True), path
    )
    return path


@pytest.fixture(scope="module")
def api_url(
    graph: Driver,
    neo4j_target: Neo4jTarget,
    executor_url: str,
    replay_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    models = ModelRoles(generator=RoleConfig(backend="replay", replay_path=replay_path))
    settings = _settings(
        neo4j_target, tmp_path_factory.mktemp("api-data"), models=models, executor_url=executor_url
    )
    with serve_in_thread(create_app(settings)) as url:
        yield url


def test_job_streams_every_candidate_and_finishes_compile_only(api_url: str) -> None:
    job_id = submit_job(api_url, {"task_ref": TASK_ID, "method": "regraph-mcgs", "budget": 6, "rollouts": 3})
    events = follow_job(api_url, job_id)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "state" and events[0][1]["data"]["state"] == "queued"
    assert events[1][1]["data"] == {"state": "running", "verification": "compile-only"}
    assert "started" in kinds and "finished" in kinds
    assert kinds[-2:] == ["state", "end"]
    assert [data["seq"] for _, data in events[:-1]] == list(range(len(events) - 1))

    streamed = [data["data"]["candidate"] for kind, data in events if kind == "candidate"]
    assert streamed, "the search produced no candidate"
    for candidate in streamed:
        verdict = candidate["evaluation"]["raw"]
        # The executor compiled it but could not run it: never a pass, never a speedup.
        assert verdict["runtime_stages"] == "not_run"
        assert verdict["passed"] is False and verdict["speedup"] is None
        assert candidate["evaluation"]["passed"] is False
    assert "new_best" not in kinds

    final = events[-1][1]
    assert final["state"] == "succeeded"
    job = httpx.get(f"{api_url}/v1/jobs/{job_id}").json()
    assert job == final
    result = job["result"]
    assert result["verification"] == "compile-only"
    assert "compile-only" in result["note"] and "not measured" in result["note"]
    assert result["search"]["best_code"] is None and result["search"]["best_speedup"] is None
    assert [c["index"] for c in result["search"]["candidates"]] == [c["index"] for c in streamed]
    assert result["counts"]["total"] == len(streamed)
    assert result["counts"]["not_verified"] >= 1  # the teacher's parallel version compiles
    # The graph offered Parallelization first: the replayed teacher step for it was compiled.
    assert streamed[0]["technique"] == "Parallelization"
    assert streamed[0]["evaluation"]["error_kind"] == "not_verified"


def test_mcgs_jobs_with_iterations_in_flight_are_reproducible(api_url: str) -> None:
    # Replayed answers and the real (GPU-less) executor: the request's setting reaches the search, and
    # two runs record the same candidates in the same order. Without a GPU nothing passes, so the
    # search ends after expanding the initial node; the schedule of iterations in flight itself is
    # tested with randomised latencies in tests/unit/search/test_mcgs.py.
    body = {
        "task_ref": TASK_ID,
        "method": "regraph-mcgs",
        "budget": 5,
        "rollouts": 3,
        "rollouts_in_flight": 3,
    }
    traces = []
    for _ in range(2):
        job_id = submit_job(api_url, body)
        final = follow_job(api_url, job_id)[-1][1]
        assert final["state"] == "succeeded"
        search = final["result"]["search"]
        assert search["config"]["rollouts_in_flight"] == 3
        assert search["evaluations_used"] <= 5
        traces.append(
            [
                (
                    c["index"],
                    c["path"],
                    c["parent_index"],
                    c["code"],
                    c["evaluation"] and c["evaluation"]["error_kind"],
                )
                for c in search["candidates"]
            ]
        )
    assert traces[0] and traces[0] == traces[1]


def test_openapi_declares_each_optimize_routes_errors(api_url: str) -> None:
    paths = httpx.get(f"{api_url}/openapi.json").json()["paths"]
    assert {"401", "404", "413", "422", "429", "503"} <= set(paths["/v1/optimize"]["post"]["responses"])
    assert "Retry-After" in paths["/v1/optimize"]["post"]["responses"]["429"]["headers"]
    assert {"404", "409"} <= set(paths["/v1/jobs/{job_id}"]["delete"]["responses"])
    assert "409" not in paths["/v1/jobs/{job_id}"]["get"]["responses"]
    assert "404" not in paths["/v1/jobs"]["get"]["responses"]
    assert "ErrorEnvelope" in str(paths["/v1/jobs/{job_id}/events"]["get"]["responses"]["404"])


def test_finished_job_replays_its_events_from_the_store(api_url: str) -> None:
    job_id = submit_job(api_url, {"task_ref": TASK_ID, "method": "cot", "budget": 1})
    live = follow_job(api_url, job_id)
    again = follow_job(api_url, job_id)
    assert again == live
    later = follow_job(api_url, job_id, after=2)
    assert [d["seq"] for _, d in later[:-1]] == [d["seq"] for _, d in live[3:-1]]


def test_inline_task_with_a_source_program(api_url: str) -> None:
    task = load_task(TASK_DIR).model_dump(mode="json")
    body = {"task": task, "source": task["reference_source"], "method": "standard", "budget": 1, "seed": 3}
    job_id = submit_job(api_url, body)
    events = follow_job(api_url, job_id)
    job = events[-1][1]
    assert job["state"] == "succeeded"
    assert job["request"]["method"] == "standard" and job["request"]["seed"] == 3
    candidates = job["result"]["search"]["candidates"]
    assert len(candidates) == 1 and candidates[0]["phase"] == "one-shot"
    assert candidates[0]["evaluation"]["raw"]["task_id"] == TASK_ID
    listed = httpx.get(f"{api_url}/v1/jobs", params={"limit": 500}).json()["jobs"]
    assert job_id in [j["id"] for j in listed]


@pytest.mark.parametrize(
    ("body", "status", "error_type", "fragment"),
    [
        ({"task_ref": TASK_ID, "method": "beam-search"}, 422, "validation_error", "method"),
        ({"task": {"id": "x", "kind": "function"}, "method": "standard"}, 422, "validation_error", "task"),
        ({"method": "standard"}, 422, "validation_error", "exactly one"),
        ({"task_ref": "no_such_task", "method": "standard"}, 404, "not_found", "no_such_task"),
        ({"task_ref": TASK_ID, "budget": 0}, 422, "validation_error", "budget"),
    ],
)
def test_bad_requests_answer_in_the_envelope(
    api_url: str, body: dict[str, Any], status: int, error_type: str, fragment: str
) -> None:
    response = httpx.post(f"{api_url}/v1/optimize", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == error_type and error["code"] == status
    assert fragment in error["message"]


def test_oversized_body_is_refused(api_url: str) -> None:
    body = {"task_ref": TASK_ID, "source": "x" * 400_000}
    response = httpx.post(f"{api_url}/v1/optimize", json=body)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"


def test_unknown_and_finished_jobs(api_url: str) -> None:
    assert httpx.get(f"{api_url}/v1/jobs/nope").json()["error"]["type"] == "not_found"
    assert httpx.get(f"{api_url}/v1/jobs/nope/events").status_code == 404
    assert httpx.delete(f"{api_url}/v1/jobs/nope").status_code == 404
    job_id = submit_job(api_url, {"task_ref": TASK_ID, "method": "standard", "budget": 1})
    follow_job(api_url, job_id)
    response = httpx.delete(f"{api_url}/v1/jobs/{job_id}")
    assert response.status_code == 409
    assert response.json()["error"]["type"] == "conflict"


def test_no_generator_model_is_a_clear_error(
    graph: Driver, neo4j_target: Neo4jTarget, executor_url: str, tmp_path: Path
) -> None:
    settings = _settings(neo4j_target, tmp_path, models=ModelRoles(generator=None), executor_url=executor_url)
    with serve_in_thread(create_app(settings)) as url:
        response = httpx.post(f"{url}/v1/optimize", json={"task_ref": TASK_ID, "method": "standard"})
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["type"] == "not_configured"
    assert "REGRAPH_MODELS__GENERATOR__BACKEND" in error["message"]


@contextmanager
def _stalling_api(
    target: Neo4jTarget, executor_url: str, data_dir: Path
) -> Iterator[tuple[str, OpenAITestServer]]:
    """The API with the OpenAI-compatible test server (an LLM stand-in) as its generator."""
    with OpenAITestServer() as llm:
        models = ModelRoles(generator=RoleConfig(backend="openai", base_url=llm.base_url, model="test-model"))
        settings = _settings(target, data_dir, models=models, executor_url=executor_url)
        with serve_in_thread(create_app(settings)) as url:
            yield url, llm


def _wait_running(url: str, job_id: str) -> None:
    with httpx.stream("GET", f"{url}/v1/jobs/{job_id}/events", timeout=120) as response:
        for kind, data in parse_sse(response.iter_lines()):
            if kind == "state" and data["data"]["state"] == "running":
                return
    raise AssertionError("the job never started running")


def test_cancel_a_running_job(
    graph: Driver, neo4j_target: Neo4jTarget, executor_url: str, tmp_path: Path
) -> None:
    with _stalling_api(neo4j_target, executor_url, tmp_path) as (url, llm):
        llm.stall_next(60)
        job_id = submit_job(url, {"task_ref": TASK_ID, "method": "standard", "budget": 1})
        _wait_running(url, job_id)
        response = httpx.delete(f"{url}/v1/jobs/{job_id}", timeout=60)
        assert response.status_code == 200
        job = response.json()
        assert job["state"] == "cancelled" and job["error"] == "cancelled by a request"
        assert job["result"] is None
        events = follow_job(url, job_id)
        assert events[-2][1]["data"]["state"] == "cancelled"
        assert events[-1][1]["state"] == "cancelled"


def test_one_key_has_a_bounded_number_of_unfinished_jobs(
    graph: Driver, neo4j_target: Neo4jTarget, executor_url: str, tmp_path: Path
) -> None:
    # Issue 15: one key could queue any number of jobs. Two per key here, one running at a time.
    _, token = Neo4jGraphStore(graph, neo4j_target.database).create_api_key(
        "jobs-limit", Role.READER, actor="test"
    )
    with OpenAITestServer() as llm:
        models = ModelRoles(generator=RoleConfig(backend="openai", base_url=llm.base_url, model="test-model"))
        settings = _settings(
            neo4j_target,
            tmp_path,
            models=models,
            executor_url=executor_url,
            max_jobs_per_key=2,
            max_concurrent_jobs=1,
            jobs_retry_after_s=7,
        )
        with serve_in_thread(create_app(settings)) as url:
            llm.stall_next(120, times=10)
            body = {"task_ref": TASK_ID, "method": "standard", "budget": 1}
            running = submit_job(url, body)  # anonymous: owner 'anonymous'
            _wait_running(url, running)
            queued = submit_job(url, body)
            refused = httpx.post(f"{url}/v1/optimize", json=body, timeout=60)
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "7"
            error = refused.json()["error"]
            assert error["type"] == "rate_limited" and "2 optimization jobs" in error["message"]
            # Another key's jobs are counted apart.
            own = httpx.post(f"{url}/v1/optimize", json=body, headers={"X-API-Key": token}, timeout=60)
            assert own.status_code == 202, own.text
            # A cancelled job frees its place.
            assert httpx.delete(f"{url}/v1/jobs/{queued}", timeout=60).status_code == 200
            again = submit_job(url, body)
            for job, headers in [(running, {}), (again, {}), (own.json()["id"], {"X-API-Key": token})]:
                # Cancelled now, or already ended (once the stall is over the replayed jobs run through).
                cancelled = httpx.delete(f"{url}/v1/jobs/{job}", headers=headers, timeout=60)
                assert cancelled.status_code in (200, 409), cancelled.text


def test_jobs_survive_a_restart_and_interrupted_ones_are_failed(
    graph: Driver, neo4j_target: Neo4jTarget, executor_url: str, tmp_path: Path
) -> None:
    answer = teacher_answer("parallelize the pixels", _trajectory(TRAJECTORY)["steps"][0]["code"])
    with _stalling_api(neo4j_target, executor_url, tmp_path) as (url, llm):
        llm.script(answer)
        done = submit_job(url, {"task_ref": TASK_ID, "method": "standard", "budget": 1})
        done_events = follow_job(url, done)
        assert done_events[-1][1]["state"] == "succeeded"
        llm.stall_next(60)
        running = submit_job(url, {"task_ref": TASK_ID, "method": "standard", "budget": 1})
        _wait_running(url, running)
    # A process that crashed leaves a running job behind (written as it would have).
    store = JobStore(graph, neo4j_target.database)
    crashed = uuid.uuid4().hex
    store.create(
        crashed, method="standard", task_id=TASK_ID, request={"task_ref": TASK_ID}, owner="anonymous"
    )
    store.mark_running(crashed)

    with _stalling_api(neo4j_target, executor_url, tmp_path) as (url, _):
        old = httpx.get(f"{url}/v1/jobs/{done}").json()
        assert old["state"] == "succeeded"
        assert old["result"]["search"]["candidates"][0]["evaluation"]["error_kind"] == "not_verified"
        assert follow_job(url, done) == done_events
        stopped = httpx.get(f"{url}/v1/jobs/{running}").json()
        assert stopped["state"] == "failed" and "interrupted by a restart" in stopped["error"]
        lost = httpx.get(f"{url}/v1/jobs/{crashed}").json()
        assert lost["state"] == "failed" and "interrupted by a restart" in lost["error"]
        assert lost["finished_at"] is not None


def test_a_verified_improvement_is_offered_as_pending_examples(
    graph: Driver, neo4j_target: Neo4jTarget
) -> None:
    # A result as a GPU executor would produce it: two verified steps, 2x then 6x over the serial code
    # (changed from the teacher's code, which the graph already holds: an existing example id is skipped).
    own = _trajectory(TRAJECTORY)
    reference = (TASK_DIR / "reference.cpp").read_text()

    def step(index: int, parent: int | None, path: list[str], speedup: float) -> Candidate:
        evaluation = Evaluation(passed=True, reward=speedup, speedup=speedup, raw={"device": "NVIDIA H100"})
        return Candidate(
            index=index,
            parent_index=parent,
            method="regraph-mcgs",
            phase="expansion",
            path=path,
            technique=path[-1],
            code=own["steps"][index]["code"] + "// tuned\n",
            evaluation=evaluation,
            reward=speedup,
            backend="replay",
            model="trajectory:test",
        )

    path = [INITIAL_TECHNIQUE, "Parallelization", "Warp divergence reduction"]
    candidates = [step(0, None, path[:2], 2.0), step(1, 0, path, 6.0)]
    result = SearchResult(
        method="regraph-mcgs",
        task_id=TASK_ID,
        best_code=candidates[1].code,
        best_path=path,
        best_reward=6.0,
        best_speedup=6.0,
        best_index=1,
        candidates=candidates,
        evaluations_used=2,
        tokens_used=0,
        prompt_tokens=0,
        completion_tokens=0,
        iterations=1,
        stop_reason="completed",
        backends=[],
        config={},
    )
    store = Neo4jGraphStore(graph, neo4j_target.database)
    offered = GraphImprovements(store, shared_embedder().embed_code, "j1").offer(result, reference)
    assert len(offered) == 2
    examples = [store.get_example(i) for i in offered]
    assert [(e.source, e.target) for e in examples] == list(pairwise(path))
    assert [e.review_status for e in examples] == [ReviewStatus.PENDING] * 2
    assert [e.speedup_over_serial for e in examples] == [2.0, 6.0]
    assert examples[1].speedup == pytest.approx(3.0)  # over the previous step
    assert examples[0].code_before == reference and examples[1].code_before == candidates[0].code
    # Without an improvement over the serial code nothing is offered.
    slower = result.model_copy(update={"best_speedup": 0.9})
    assert GraphImprovements(store, shared_embedder().embed_code, "j2").offer(slower, reference) == []


def test_optimize_requires_a_key(neo4j_target: Neo4jTarget, tmp_path: Path) -> None:
    settings = _settings(neo4j_target, tmp_path, anonymous_read=False)
    with serve_in_thread(create_app(settings)) as url:
        created = httpx.post(f"{url}/v1/optimize", json={"program": "int main(){}"}, timeout=30)
        listed = httpx.get(f"{url}/v1/jobs", timeout=30)
    for response in (created, listed):
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "unauthorized"
