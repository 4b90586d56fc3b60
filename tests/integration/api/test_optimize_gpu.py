"""``/v1/optimize`` end to end on a GPU host: the whole loop over real HTTP, verified on the device.

The real API on the session's embedded Neo4j loaded with the committed seed graph (built from the
building tasks only), the real executor service with its GPU runtime, and, standing in for the small
model (whose weights cannot be downloaded here), the replay backend built from the teacher
trajectories of three held-out tasks, one per tier. Each job must stream its candidates and verdicts
as server-sent events and finish with verified code that is faster than the serial reference. A
job cancelled while its candidates are evaluated on the GPU (the LLM stand-in there is the local
OpenAI-compatible test server, answering every step) must stop without taking either service down.

Needs an NVIDIA GPU, pycuda and Java (for the embedded Neo4j); skipped cleanly elsewhere. With
``REGRAPH_GPU_E2E_OUT`` set, a summary of every job is written there as JSON (the device script
commits it under bench/results/).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.neo4j]

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)

from neo4j import Driver  # noqa: E402  (after the skip: a GPU host without the driver skips above)
from pydantic import SecretStr  # noqa: E402

from api.app import create_app  # noqa: E402
from api.settings import ApiSettings, default_seed_graph  # noqa: E402
from executor.app import create_app as create_executor_app  # noqa: E402
from executor.settings import ExecutorSettings  # noqa: E402
from graphdb.connection import Neo4jTarget  # noqa: E402
from regraph_cli.optimize import parse_sse  # noqa: E402
from search.backends.config import ModelRoles, RoleConfig  # noqa: E402
from search.backends.replay import records_from_trajectories, teacher_answer, write_replay  # noqa: E402
from tests.conftest import CLEAR_GRAPH  # noqa: E402
from tests.support.jobs import follow_job, submit_job  # noqa: E402
from tests.support.openai_test_server import OpenAITestServer  # noqa: E402
from tests.support.servers import serve_in_thread  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
TRAJECTORIES = ROOT / "bench" / "trajectories"
# Held-out tasks (bench/split.json "eval"), one per tier, none of them in the seed graph.
TASKS = {"fir_decimate_f32": "easy", "poly_eval_horner_f32": "medium", "heat2d_steps_f32": "hard"}
CANCEL_TASK = "black_scholes_f32"
BUDGET = 8


@pytest.fixture(scope="module")
def seeded(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> Driver:
    """An empty database: the API loads the seed graph into it on start-up."""
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(CLEAR_GRAPH).consume()
    return neo4j_driver


@pytest.fixture(scope="module")
def gpu_executor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ExecutorSettings(cache_dir=tmp_path_factory.mktemp("executor-cache"), runtime="gpu")
    with serve_in_thread(create_executor_app(settings)) as url:
        device = httpx.get(f"{url}/v1/device", timeout=60).json()
        assert device["runtime_checks_available"] is True, device
        yield url


@pytest.fixture(scope="module")
def api_url(
    seeded: Driver, neo4j_target: Neo4jTarget, gpu_executor: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    replay = tmp_path_factory.mktemp("replay") / "held_out.replay.jsonl"
    lines = [
        line
        for task_id in TASKS
        for line in (TRAJECTORIES / f"{task_id}.jsonl").read_text().splitlines()
        if line.strip()
    ]
    write_replay(records_from_trajectories(lines, one_shot_from_final=True), replay)
    settings = ApiSettings(
        neo4j_uri=neo4j_target.uri,
        neo4j_password=SecretStr(neo4j_target.password),
        data_dir=tmp_path_factory.mktemp("api-data"),
        log_format="text",
        anonymous_read=True,
        seed_graph=default_seed_graph(),
        executor_url=gpu_executor,
        models=ModelRoles(generator=RoleConfig(backend="replay", replay_path=replay)),
    )
    with serve_in_thread(create_app(settings)) as url:
        yield url


@pytest.fixture(scope="module")
def summary() -> Iterator[dict[str, Any]]:
    record: dict[str, Any] = {"host": platform.node(), "jobs": []}
    yield record
    out = os.environ.get("REGRAPH_GPU_E2E_OUT")
    if out:
        Path(out).write_text(json.dumps(record, indent=2) + "\n")


@pytest.mark.parametrize("task_id", list(TASKS))
def test_a_replayed_search_over_http_ends_with_verified_faster_code(
    api_url: str, task_id: str, summary: dict[str, Any]
) -> None:
    listed = httpx.get(f"{api_url}/v1/techniques", params={"limit": 500}, timeout=60)
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["items"]) >= 20  # the seed graph was loaded on start-up

    started = time.monotonic()
    job_id = submit_job(api_url, {"task_ref": task_id, "method": "regraph-mcgs", "budget": BUDGET, "seed": 0})
    events = follow_job(api_url, job_id, timeout=900)
    wall_s = time.monotonic() - started
    kinds = [kind for kind, _ in events]
    assert events[1][1]["data"] == {"state": "running", "verification": "verified"}
    assert kinds[-2:] == ["state", "end"] and "new_best" in kinds

    job = events[-1][1]
    assert job["state"] == "succeeded", job.get("error")
    result = job["result"]
    search = result["search"]
    assert result["verification"] == "verified"
    assert search["evaluations_used"] <= BUDGET
    streamed = [data["data"]["candidate"] for kind, data in events if kind == "candidate"]
    assert [c["index"] for c in streamed] == [c["index"] for c in search["candidates"]]

    # The best code was run on the GPU, checked against the serial reference and timed: faster.
    best = next(c for c in search["candidates"] if c["index"] == search["best_index"])
    verdict = best["evaluation"]["raw"]
    assert verdict["passed"] is True and verdict["runtime_stages"] == "run"
    assert best["code"] == search["best_code"]
    assert search["best_speedup"] == pytest.approx(verdict["speedup"])
    assert search["best_speedup"] > 1.0
    assert search["best_path"][0] == "sequential code" and len(search["best_path"]) >= 2
    # Every candidate that passed carries a measured speedup; every failure a kind.
    for candidate in search["candidates"]:
        evaluation = candidate["evaluation"]
        if evaluation is None:
            continue
        if evaluation["passed"]:
            assert evaluation["speedup"] is not None and evaluation["speedup"] > 0
        else:
            assert evaluation["error_kind"]

    summary["jobs"].append(
        {
            "task_id": task_id,
            "tier": TASKS[task_id],
            "job_id": job_id,
            "wall_s": round(wall_s, 2),
            "best_speedup": search["best_speedup"],
            "best_path": search["best_path"],
            "evaluations_used": search["evaluations_used"],
            "candidates": len(search["candidates"]),
            "passed": sum(1 for c in search["candidates"] if c["evaluation"] and c["evaluation"]["passed"]),
            "events": len(events),
            "device": verdict.get("device"),
            "backends": search["backends"],
        }
    )


def test_cancelling_a_job_mid_search_leaves_both_services_serving(
    api_url: str,  # the module's API has loaded the seed graph
    neo4j_target: Neo4jTarget,
    gpu_executor: str,
    tmp_path: Path,
    summary: dict[str, Any],
) -> None:
    # A long search: the LLM stand-in (a local OpenAI-compatible test server) answers every step with
    # the teacher's first CUDA version, so each step is a real evaluation on the GPU.
    first = json.loads((TRAJECTORIES / f"{CANCEL_TASK}.jsonl").read_text().splitlines()[0])["steps"][0]
    with OpenAITestServer() as llm:
        llm.script(*[teacher_answer(first["think"], first["code"])] * 400)
        models = ModelRoles(generator=RoleConfig(backend="openai", base_url=llm.base_url, model="test-model"))
        settings = ApiSettings(
            neo4j_uri=neo4j_target.uri,
            neo4j_password=SecretStr(neo4j_target.password),
            data_dir=tmp_path,
            log_format="text",
            anonymous_read=True,
            seed_graph=None,  # loaded by the module's API already
            executor_url=gpu_executor,
            models=models,
        )
        with serve_in_thread(create_app(settings)) as url:
            body = {"task_ref": CANCEL_TASK, "method": "regraph-mcgs", "budget": 200, "seed": 0}
            job_id = submit_job(url, body)
            evaluated = 0
            with httpx.stream("GET", f"{url}/v1/jobs/{job_id}/events", timeout=600) as response:
                for kind, data in parse_sse(response.iter_lines()):
                    if kind == "candidate" and data["data"]["candidate"]["evaluation"] is not None:
                        evaluated += 1
                        if evaluated == 2:
                            break  # candidates are being evaluated on the GPU: cancel now
            deleted = httpx.delete(f"{url}/v1/jobs/{job_id}", timeout=120)
            assert deleted.status_code == 200, deleted.text
            job = deleted.json()
            assert job["state"] == "cancelled" and job["result"] is None
            tail = follow_job(url, job_id, timeout=900)
            assert tail[-1][1]["state"] == "cancelled"
            passed = [d["data"]["candidate"]["evaluation"]["passed"] for k, d in tail if k == "candidate"]
            assert passed and passed[0] is True  # the teacher's code was verified before the cancel
            # Both services still answer, and a new job runs to the end after the cancellation.
            assert httpx.get(f"{gpu_executor}/v1/device", timeout=60).status_code == 200
            again = submit_job(url, {"task_ref": CANCEL_TASK, "method": "standard", "budget": 1})
            final = follow_job(url, again, timeout=900)[-1][1]
            assert final["state"] == "succeeded"
            assert final["result"]["search"]["candidates"][0]["evaluation"]["passed"] is True
    summary["cancel"] = {
        "task_id": CANCEL_TASK,
        "cancelled_job": job_id,
        "candidates_streamed_before_cancel": len(passed),
        "job_after_cancel": final["state"],
    }
