"""A timing hack of every class the CPU can show is refused through ``/v1/optimize``, and nothing of it
reaches the graph (issue 33, "Done when").

The real API on the session's Neo4j (a small graph of its own, written here, with improvements offered
to the graph as in production), the REAL executor service on loopback with its host runtime (function
tasks run on the CPU, so the candidate is verified here), and the replay model answering every prompt
of a task with that task's hack. Each job is an MCGS search with a budget of one evaluation, so a
candidate that passed would be offered to the graph as a pending example: the honest control shows
that it is (the graph then holds its step), and every hack is refused with its kind and leaves the
graph exactly as it was: no example, no transition, no statistic changed.

Classes shown here (CPU, function tasks): value-keyed memo of every answer (``implausible``: only the
physical floor catches it), pointer-keyed memo, call counting and timing-call detection (the timed
calls' outputs are checked), a host thread and a persisting-L2 set-aside (static rules), NaN, precision
downgrade, size specialisation, input mutation. GPU-only classes (stale outputs after a failed launch,
side streams, a kernel's timer, a kernel's memo) are the GPU corpus's (``tests/gpu/adversarial/``);
the value-keyed memo of the last answer is no longer a hack (timed like the honest code:
``tests/integration/executor/test_executor_hacks_host.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from neo4j import Driver
from pydantic import SecretStr

from api.app import create_app
from api.settings import ApiSettings
from executor.app import create_app as create_executor_app
from executor.settings import ExecutorSettings
from graphdb.connection import Neo4jTarget
from search.backends.config import ModelRoles, RoleConfig
from search.backends.replay import ReplayRecord, teacher_answer, write_replay
from tests.integration.api.test_optimize import CLEAR, _write_graph
from tests.support.hostcode import one_input_task, write_task
from tests.support.jobs import follow_job, submit_job
from tests.support.servers import serve_in_thread

pytestmark = pytest.mark.neo4j

SIGNATURE = "(int n, const float* x, double* s)"
BODY = "double t = 0; for (int i = 0; i < n; ++i) t += x[i]; s[0] = t;"
# A kernel it never launches: the static rules want a function candidate to use the GPU.
STUB = "__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"


def head(task_id: str) -> str:
    return f'extern "C" void {task_id}{SIGNATURE} {{\n'


# Each hack: (timing size, the candidate's code before and after the function's head, the kinds that
# refuse it). "BIG": 48 MB read at the timing size, more than this host's last-level cache, so that the
# floor has bytes to bound; the others are small.
BIG, SMALL = 12 << 20, 1 << 16
HACKS: dict[str, tuple[int, str, str, set[str]]] = {
    # Remembers every answer, keyed on a sample of the input values: right, and far below the floor.
    "value_memo_all": (
        BIG,
        "static float keys[16][3]; static double sums[16]; static int kept = 0;\n",
        "for (int j = 0; j < kept; ++j) if (keys[j][0] == x[0] && keys[j][1] == x[n / 2] && keys[j][2] == x[n - 1]) "
        "{ s[0] = sums[j]; return; }\n"
        + BODY
        + "\nif (kept < 16) { keys[kept][0] = x[0]; keys[kept][1] = x[n / 2]; keys[kept][2] = x[n - 1]; "
        "sums[kept++] = t; } }\n",
        {"implausible"},
    ),
    # Remembers its last answer keyed on the input's address: another set's answer where an address is
    # reused, or the right one without reading the data.
    "pointer_memo": (
        BIG,
        "static const float* seen_x = 0; static int seen_n = -1; static double seen_s = 0;\n",
        "if (x == seen_x && n == seen_n) { s[0] = seen_s; return; }\n"
        + BODY
        + "\nseen_x = x; seen_n = n; seen_s = t; }\n",
        {"wrong_output", "implausible", "nondeterministic"},
    ),
    # Right on the correctness calls (three test-size sets, one timing-size set, the first again: the
    # defaults), then the last answer again.
    "call_count": (
        SMALL,
        "static int calls = 0; static double last = 0;\n",
        "if (++calls > 5) { s[0] = last; return; }\n" + BODY + "\nlast = t; }\n",
        {"wrong_output"},
    ),
    # A call at the timing size within 50 ms of one at the same size is taken for a timed one (the
    # checked calls alternate sizes): the last answer again.
    "timing_detect": (
        SMALL,
        "#include <chrono>\nstatic double last = 0; static long long last_ns = 0; static int last_n = 0;\n",
        "long long now = std::chrono::duration_cast<std::chrono::nanoseconds>("
        "std::chrono::steady_clock::now().time_since_epoch()).count();\n"
        "bool timed = n > 1000 && n == last_n && now - last_ns < 50000000LL; last_ns = now; last_n = n;\n"
        "if (timed) { s[0] = last; return; }\n" + BODY + "\nlast = t; }\n",
        {"wrong_output"},
    ),
    # Defers the work to a host thread.
    "host_thread": (
        SMALL,
        "#include <thread>\n",
        "std::thread([=] { " + BODY + " }).detach(); }\n",
        {"static_rejected"},
    ),
    # Sets a persisting-L2 set-aside.
    "l2_limit": (
        SMALL,
        "#include <cuda_runtime.h>\n",
        "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);\n" + BODY + " }\n",
        {"static_rejected"},
    ),
    # NaN on most sets (x[0] below 0.95, x uniform in [0, 1]). Until session 35 on about half of them:
    # then every set the checks look at (about six) fell on the other half once in ~2^6 runs, and CI's
    # rehearsal saw the candidate pass.
    "nan": (
        SMALL,
        "#include <cmath>\n",
        BODY + "\nif (x[0] < 0.95f) s[0] = NAN; }\n",
        {"wrong_output", "unwritten_output"},
    ),
    # Reads its inputs at 8 bits of precision.
    "precision_downgrade": (
        SMALL,
        "",
        "double t = 0; for (int i = 0; i < n; ++i) t += (float)(int)(x[i] * 256.0f) / 256.0f; s[0] = t; }\n",
        {"wrong_output"},
    ),
    # Right at the test size (1000) only: half the work at any other size.
    "size_special": (
        SMALL,
        "",
        "int m = n == 1000 ? n : n / 2; double t = 0; for (int i = 0; i < m; ++i) t += x[i]; s[0] = t; }\n",
        {"wrong_output"},
    ),
    # Writes into its const input, so a later call on the same buffer starts from other values.
    "input_mutation": (
        SMALL,
        "",
        BODY + "\nfloat* w = const_cast<float*>(x); for (int i = 0; i < n; ++i) w[i] *= 2.0f; }\n",
        {"wrong_output"},
    ),
}
CONTROL = "hack_control_api"


def task_spec(task_id: str, timing: int) -> dict[str, Any]:
    return one_input_task(
        task_id,
        domain="reduction",
        description="s[0] = the sum of n floats",
        timing=timing,
        output=("s", "float64", "1"),
        low=0.0,
        high=1.0,
    )


def sources() -> dict[str, tuple[str, str, int]]:
    """Every task's (candidate, reference, timing size): the hacks on the honest reference, and the
    control, whose reference sums four times over and whose candidate once (a real 2-4x)."""
    out = {}
    for name, (timing, before, after, _) in HACKS.items():
        task_id = f"hack_{name}_api"
        out[task_id] = (before + head(task_id) + after + STUB, head(task_id) + BODY + " }\n", timing)
    four_times = "double t = 0; for (int r = 0; r < 4; ++r) { t = 0; for (int i = 0; i < n; ++i) t += x[i]; } s[0] = t;"
    out[CONTROL] = (head(CONTROL) + BODY + " }\n" + STUB, head(CONTROL) + four_times + " }\n", SMALL)
    return out


@pytest.fixture(scope="module")
def executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Every job is another task's: workers prepared for a task's next candidate (prepare_next) would be
    # stopped unused, after their reference run.
    executor = ExecutorSettings(
        cache_dir=tmp_path_factory.mktemp("optimize-hacks-executor"),
        runtime="host",
        run_timeout_s=120,
        prepare_next=False,
    )
    with serve_in_thread(create_executor_app(executor)) as url:
        yield url


@pytest.fixture(scope="module")
def api_url(
    executor_url: str,
    neo4j_driver: Driver,
    neo4j_target: Neo4jTarget,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(CLEAR).consume()
    _write_graph(neo4j_driver, neo4j_target.database)  # sequential code -> Parallelization -> ...
    tmp = tmp_path_factory.mktemp("optimize-hacks")
    replay = tmp / "hacks.replay.jsonl"
    # Every prompt of a task (whatever the technique) is answered with that task's candidate.
    write_replay(
        [
            ReplayRecord(match={"task": task_id}, completion=teacher_answer("", code), model="hacker")
            for task_id, (code, _, _) in sources().items()
        ],
        replay,
    )
    settings = ApiSettings(
        neo4j_uri=neo4j_target.uri,
        neo4j_password=SecretStr(neo4j_target.password),
        data_dir=tmp / "api",
        log_format="text",
        seed_graph=None,
        anonymous_read=True,
        models=ModelRoles(generator=RoleConfig(backend="replay", replay_path=replay)),
        executor_url=executor_url,
        offer_improvements_to_graph=True,
        max_concurrent_jobs=4,
        max_jobs_per_key=len(HACKS) + 1,
    )
    with serve_in_thread(create_app(settings)) as url:
        yield url


def graph_state(driver: Driver, database: str) -> dict[str, Any]:
    """What the search and retrieval read: examples, techniques, transitions and their statistics."""
    with driver.session(database=database) as session:
        record = session.run(
            "MATCH (e:Example) WITH count(e) AS examples, collect(e.task_id) AS tasks "
            "OPTIONAL MATCH ()-[r:TRANSITION]->() "
            "WITH examples, tasks, collect([r.key, r.n_examples, r.n_verified, r.mean_speedup, "
            "r.candidate_ids]) AS transitions "
            "MATCH (t:Technique) RETURN examples, tasks, transitions, count(t) AS techniques"
        ).single(strict=True)
    return {
        "examples": record["examples"],
        "tasks": sorted(record["tasks"]),
        "transitions": sorted(record["transitions"], key=lambda r: r[0]),
        "techniques": record["techniques"],
    }


def run_jobs(api_url: str, tmp_path: Path, task_ids: list[str]) -> dict[str, dict[str, Any]]:
    """One MCGS job of budget 1 per task, all submitted at once; each finished job by task."""
    jobs = {}
    for task_id in task_ids:
        _, reference, timing = sources()[task_id]
        task = write_task(tmp_path, task_spec(task_id, timing), reference).model_dump(mode="json")
        body = {"task": task, "method": "regraph-mcgs", "budget": 1, "rollouts": 1, "seed": 1}
        jobs[task_id] = submit_job(api_url, body)
    return {task_id: follow_job(api_url, job_id, timeout=400)[-1][1] for task_id, job_id in jobs.items()}


def evaluated(job: dict[str, Any]) -> dict[str, Any]:
    """The verdict of the job's one evaluated candidate."""
    assert job["state"] == "succeeded", job
    assert job["result"]["verification"] == "verified"
    verdicts = [c["evaluation"]["raw"] for c in job["result"]["search"]["candidates"] if c.get("evaluation")]
    assert len(verdicts) == 1, verdicts
    raw: dict[str, Any] = verdicts[0]
    return raw


# Ten evaluations (four at once) on the host runtime: 86 s on this 2-core VM at load 6, over 300 s at 25.
@pytest.mark.timeout(900)
def test_every_hack_class_is_refused_and_nothing_of_it_reaches_the_graph(
    api_url: str, executor_url: str, neo4j_driver: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    # No candidate was timed yet: the device has no measured figures.
    assert httpx.get(f"{executor_url}/v1/device", timeout=60).json()["peak"] is None
    before = graph_state(neo4j_driver, neo4j_target.database)
    jobs = run_jobs(api_url, tmp_path, [f"hack_{name}_api" for name in HACKS])
    got = {}
    for name, (_, _, _, kinds) in HACKS.items():
        job = jobs[f"hack_{name}_api"]
        verdict = evaluated(job)
        got[name] = (verdict["error"], verdict["stage"], verdict["message"][:200])
        assert verdict["passed"] is False and verdict["error"] in kinds, (name, got[name])
        assert verdict["reward"] == -1.0
        assert job["result"]["search"]["best_code"] is None and job["result"]["offered_examples"] == []
    # The timed calls' checks and the floor name what they found.
    assert got["call_count"][1] == got["timing_detect"][1] == "timing", got
    assert got["call_count"][2].startswith("timed call "), got["call_count"]
    memo = evaluated(jobs["hack_value_memo_all_api"])
    assert memo["stage"] == "timing" and "below the physical floor" in memo["message"]
    assert memo["floor"]["floor_ms"] > memo["floor"]["measured_ms"]
    assert graph_state(neo4j_driver, neo4j_target.database) == before


def test_the_honest_control_reaches_the_graph_through_the_same_path(
    api_url: str, executor_url: str, neo4j_driver: Driver, neo4j_target: Neo4jTarget, tmp_path: Path
) -> None:
    """Without this, "nothing reached the graph" could mean that nothing ever does. Also: the figures
    the floor was computed from are kept with the executor's device record."""
    before = graph_state(neo4j_driver, neo4j_target.database)
    job = run_jobs(api_url, tmp_path, [CONTROL])[CONTROL]
    verdict = evaluated(job)
    assert verdict["passed"] is True and verdict["speedup"] > 1.0, verdict["message"]
    assert verdict["floor"]["floor_ms"] < verdict["floor"]["measured_ms"]
    offered = job["result"]["offered_examples"]
    after = graph_state(neo4j_driver, neo4j_target.database)
    assert len(offered) == 1 and after["examples"] == before["examples"] + 1
    assert after["tasks"].count(CONTROL) == 1 and after["transitions"] != before["transitions"]
    peak = httpx.get(f"{executor_url}/v1/device", timeout=60).json()["peak"]
    assert peak["name"] == "host" and peak["source"] == "measured" and peak["host_gbps"] > 0, peak
