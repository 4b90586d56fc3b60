"""A timing hack is refused through ``/v1/optimize`` and nothing of it reaches the graph (issue 33).

The real API on the session's Neo4j, the REAL executor service on loopback with its host runtime
(function tasks run on the CPU, so the candidate is verified here), and the replay model answering the
job's one-shot prompt with a candidate that remembers every answer it gave, keyed on a sample of the
input values. Its answers are right, so only the physical floor refuses it: ``implausible``, the job
finds no improvement and the graph gets no example of the task.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from executor.app import create_app as create_executor_app
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from graphdb.connection import Neo4jTarget
from search.backends.config import ModelRoles, RoleConfig
from search.backends.replay import records_from_trajectories, write_replay
from tests.support.jobs import follow_job, submit_job
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.neo4j

TASK_ID = "hack_sum_api"
HEAD = 'extern "C" void hack_sum_api(int n, const float* x, double* s) {\n'
BODY = "double t = 0; for (int i = 0; i < n; ++i) t += x[i]; s[0] = t;"
# A kernel it never launches: the static rules want a function candidate to use the GPU.
STUB = "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
MEMO = (
    "static float keys[16][3]; static double sums[16]; static int kept = 0;\n"
    + HEAD
    + "for (int j = 0; j < kept; ++j) if (keys[j][0] == x[0] && keys[j][1] == x[n / 2] && keys[j][2] == x[n - 1]) "
    "{ s[0] = sums[j]; return; }\n"
    + BODY
    + "\nif (kept < 16) { keys[kept][0] = x[0]; keys[kept][1] = x[n / 2]; keys[kept][2] = x[n - 1]; sums[kept++] = t; } }\n"
    + STUB
)
TASK = {
    "format": "regraph.task/v1",
    "kind": "function",
    "id": TASK_ID,
    "domain": "reduction",
    "description": "s[0] = the sum of n floats",
    "entry": TASK_ID,
    "signature": f"void {TASK_ID}(int n, const float* x, double* s)",
    # 48 MB read at the timing size: more than this host's last-level cache, so there is a floor.
    "params": {"n": {"test": 1000, "timing": 12 << 20}},
    "args": [
        {"name": "n", "kind": "scalar", "dtype": "int32", "value": "n"},
        {
            "name": "x",
            "kind": "array",
            "dtype": "float32",
            "size": "n",
            "intent": "in",
            "generator": {"dist": "uniform", "low": 0.0, "high": 1.0},
        },
        {"name": "s", "kind": "array", "dtype": "float64", "size": "1", "intent": "out"},
    ],
    "compare": {"rtol": 1e-6, "atol": 1e-6},
}


@pytest.fixture(scope="module")
def api_url(
    neo4j_driver: Driver, neo4j_target: Neo4jTarget, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("optimize-hacks")
    trajectory = {
        "task_id": TASK_ID,
        "model": "hacker",
        "steps": [{"method": "Parallelization", "code": MEMO}],
    }
    replay = tmp / "hack.replay.jsonl"
    write_replay(records_from_trajectories([json.dumps(trajectory)], one_shot_from_final=True), replay)
    executor = ExecutorSettings(cache_dir=tmp / "executor", runtime="host", run_timeout_s=120)
    with serve_in_thread(create_executor_app(executor)) as executor_url:
        settings = ApiSettings(
            neo4j_uri=neo4j_target.uri,
            neo4j_password=SecretStr(neo4j_target.password),
            data_dir=tmp / "api",
            log_format="text",
            seed_graph=None,
            anonymous_read=True,
            models=ModelRoles(generator=RoleConfig(backend="replay", replay_path=replay)),
            executor_url=executor_url,
        )
        with serve_in_thread(create_app(settings)) as url:
            yield url


def test_a_memo_of_every_answer_is_refused_and_never_reaches_the_graph(
    api_url: str, neo4j_driver: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    directory = tmp_path / TASK_ID
    directory.mkdir()
    (directory / "task.json").write_text(json.dumps(TASK))
    (directory / "reference.cpp").write_text(HEAD + BODY + " }\n")
    task = load_task(directory).model_dump(mode="json")
    job_id = submit_job(
        api_url,
        {"task": task, "source": task["reference_source"], "method": "standard", "budget": 1, "seed": 1},
    )
    events = follow_job(api_url, job_id, timeout=240)
    job = events[-1][1]
    assert job["state"] == "succeeded", job
    assert job["result"]["verification"] == "verified"
    candidates = job["result"]["search"]["candidates"]
    assert len(candidates) == 1
    verdict = candidates[0]["evaluation"]["raw"]
    assert verdict["passed"] is False and verdict["error"] == "implausible", verdict["message"]
    assert verdict["stage"] == "timing" and verdict["reward"] == -1.0
    assert verdict["floor"]["floor_ms"] > verdict["floor"]["measured_ms"]
    assert job["result"]["search"]["best_code"] is None
    with neo4j_driver.session(database=neo4j_target.database) as session:
        held = session.run("MATCH (e:Example {task_id: $task}) RETURN count(e) AS n", task=TASK_ID).single()
    assert held is not None and held["n"] == 0
