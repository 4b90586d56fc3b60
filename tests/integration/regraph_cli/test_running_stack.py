"""CLI commands while a stack runs on the same data directory (the `./dev up` case of issue 15).

A real stack on loopback started by `regraph up` (a process of its own), with its own embedded Neo4j
on a temporary data directory; the commands run as separate processes with only that data directory
(and the embedded Neo4j's port, which the running server holds) in their environment. Without the running stack's
``running.json`` they would start a second Neo4j there and fail on the port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from api.discovery import RunningStack, find_running, running_file
from graphdb.connection import Neo4jTarget, open_driver
from graphdb.embedded import EmbeddedConfig, free_port
from graphdb.jobs import JobStore
from tests.support.servers import compile_only_executor

pytestmark = pytest.mark.neo4j

ROOT = Path(__file__).resolve().parents[3]
TRAJECTORY = ROOT / "bench" / "trajectories" / "jacobi2d_5pt_f32.jsonl"


def _environment(data_dir: Path, neo4j_port: int) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("REGRAPH_", "NEO4J_"))}
    return {
        **keep,
        "REGRAPH_DATA_DIR": str(data_dir),
        "REGRAPH_NEO4J_PORT": str(neo4j_port),  # the running server's: a second one could not bind it
        "REGRAPH_SEED_GRAPH": "none",
        "REGRAPH_PRELOAD_RETRIEVAL": "false",
        "REGRAPH_LOG_LEVEL": "WARNING",
    }


def _regraph(env: dict[str, str], *arguments: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "regraph_cli", *arguments],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_commands_reach_the_stack_running_on_their_data_directory(tmp_path: Path) -> None:
    """`regraph up` opens its port before the start-up ends: it prints the API's URL at once, says it
    is starting, and names the database only once it has been reached (not "None"); the commands then
    reach that stack; it stops on Ctrl-C (status 0, or 130 for the interrupt) and removes its
    ``running.json``. (One stack for both checks: a Neo4j and an API start less.)"""
    data_dir, port, neo4j_port = tmp_path / "data", free_port(), free_port()
    env = _environment(data_dir, neo4j_port)
    with (
        compile_only_executor(tmp_path / "executor-cache") as executor_url,
        (tmp_path / "up.log").open("w") as log,  # the stack's log, for a failure's diagnosis
    ):
        # Only the stack is told where the executor is: the commands find it through the stack.
        up = subprocess.Popen(
            [sys.executable, "-m", "regraph_cli", "up", "--port", str(port), "--no-with-executor"],
            env={**env, "REGRAPH_EXECUTOR_URL": executor_url},
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            url = _announced(up, port)
            _commands_reach_the_stack(tmp_path, data_dir, env, url, up.pid, executor_url)
        finally:
            up.send_signal(2)  # Ctrl-C
            try:
                code = up.wait(timeout=120)
            except subprocess.TimeoutExpired:
                up.kill()
                raise
        assert code in (0, 130)
    assert not running_file(data_dir).exists()  # removed at shut-down


def _announced(up: subprocess.Popen[str], port: int) -> str:
    """Read `regraph up`'s banner, check it, wait until the stack is ready; the API's URL."""
    lines: list[str] = []
    assert up.stdout is not None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = up.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if "Ctrl-C" in line:  # the last line of the banner
            break
    text = "\n".join(lines)
    assert lines and lines[0].startswith(f"ReGraph API serving on http://127.0.0.1:{port}"), text
    assert any(line.strip().startswith("starting:") for line in lines), text
    neo4j = [line.strip() for line in lines if line.strip().startswith("Neo4j:")]
    assert neo4j and neo4j[0].startswith("Neo4j: bolt://127.0.0.1:"), text
    # Whatever the stack prints later is read, so that a full pipe never blocks it.
    threading.Thread(target=up.stdout.read, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
    return url


def _commands_reach_the_stack(
    tmp_path: Path, data_dir: Path, env: dict[str, str], url: str, pid: int, executor_url: str
) -> None:
    neo4j_port = int(env["REGRAPH_NEO4J_PORT"])
    running = RunningStack.model_validate(json.loads(running_file(data_dir).read_text()))
    assert (running.pid, running.api_url, running.embedded) == (pid, url, True)
    assert running.neo4j_uri == f"bolt://127.0.0.1:{neo4j_port}"
    says = f"the ReGraph API at {url} (pid {pid})"
    password = EmbeddedConfig(home=data_dir / "neo4j").password_file.read_text().strip()
    with open_driver(Neo4jTarget(running.neo4j_uri, "neo4j", password)) as driver:
        jobs = JobStore(driver, "neo4j")
        created = _regraph(env, "keys", "create-admin", "ops")
        assert created.returncode == 0, created.stderr
        assert says in created.stderr
        token = created.stdout.strip().splitlines()[-1]
        # The running API knows the key at once: the command wrote into its graph.
        keys = httpx.get(f"{url}/v1/keys", headers={"X-API-Key": token}, timeout=30)
        assert keys.status_code == 200 and [k["name"] for k in keys.json()] == ["ops"]

        built = _regraph(env, "graph", "build", str(TRAJECTORY))
        assert built.returncode == 0, built.stderr
        page = httpx.get(f"{url}/v1/techniques", headers={"X-API-Key": token}, timeout=30).json()
        techniques = len(page["items"])
        assert techniques >= 3  # sequential code and the trajectory's techniques, seen by the API

        stats = _regraph(env, "graph", "stats")
        assert stats.returncode == 0, stats.stderr
        assert "examples pending review" in stats.stdout and says in stats.stderr

        status = _regraph(env, "db", "status")
        assert status.returncode == 0 and "applied" in status.stdout, status.stderr

        # `regraph mcp` (stdio) serves from the running stack's graph, as a coding agent launches it,
        # and leaves the running API's jobs alone (a job it has queued is not "left unfinished").
        jobs.create("api-job", method="regraph-mcgs", task_id="jacobi2d_5pt_f32", request={})
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "regraph_cli", "mcp", "--no-with-executor"],
            env=env,
            cwd=str(ROOT),
        )

        async def agent() -> None:
            async with Client(server) as client:
                found = await client.call_tool(
                    "cypher", {"query": "MATCH (t:Technique) RETURN count(t) AS n"}
                )
                assert not found.is_error, found.content
                [text] = found.content
                assert isinstance(text, TextContent)
                assert json.loads(text.text)["rows"] == [{"n": techniques}]

        anyio.run(agent)
        assert jobs.get("api-job").state == "queued"

        # `regraph optimize` in process, on the graph (--graph neo4j, the default) and the executor of
        # the running stack: no --executor-url, no REGRAPH_EXECUTOR_URL, no second Neo4j.
        task_dir = ROOT / "regraph_data" / "tasks" / "mandelbrot_q28_i32"
        optimized = _regraph(
            env,
            "optimize",
            str(task_dir / "reference.cpp"),
            "--task",
            str(task_dir),
            "--replay",
            str(ROOT / "bench" / "trajectories" / "mandelbrot_q28_i32.jsonl"),
            "--budget",
            "1",
            "--out",
            str(tmp_path / "optimized"),
        )
        assert optimized.returncode == 0, optimized.stderr
        assert f"{says} runs on {data_dir}" in " ".join(optimized.stderr.split())
        assert f"its executor at {executor_url}" in " ".join(optimized.stderr.split())
        result = json.loads((tmp_path / "optimized" / "mandelbrot_q28_i32" / "result.json").read_text())
        assert result["verification"] == "compile-only" and len(result["search"]["candidates"]) == 1

        # `regraph bench` with the graph as its knowledge: the running stack's Neo4j too.
        benched = _regraph(
            env,
            "bench",
            "cudaeval",
            "--executor-url",
            executor_url,
            "--out",
            str(tmp_path / "bench"),
            "--knowledge",
            "graph",
            "--tasks",
            "mandelbrot_q28_i32",
            "--budget",
            "1",
            "--no-final-evaluation",
        )
        assert benched.returncode == 0, benched.stderr
        assert f"{says} runs on {data_dir}" in " ".join(benched.stderr.split())
        assert (tmp_path / "bench" / "result.json").exists()

        # A second stack on the same directory is refused at once, naming the first.
        started = time.monotonic()
        second = _regraph(env, "up", "--port", str(free_port()), "--no-with-executor", timeout=60)
        assert second.returncode == 1
        assert f"already running on {data_dir}: the API at {url} (pid {pid})" in " ".join(
            second.stderr.split()
        )
        # No Neo4j was started to find out (up to 180 s): the interpreter's imports only, which took
        # 16-18 s in `regraph up`'s own refusal with the machine loaded ~16 (test_up_preflight).
        assert time.monotonic() - started < 45


def test_a_stale_running_file_is_ignored(tmp_path: Path) -> None:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    stale = RunningStack(
        pid=finished.pid,
        api_url="http://127.0.0.1:9",
        neo4j_uri=f"bolt://127.0.0.1:{free_port()}",
        embedded=True,
        started_at="2026-11-27T00:00:00+00:00",
    )
    path = running_file(tmp_path)
    path.write_text(stale.model_dump_json())
    assert find_running(tmp_path) is None
    assert not path.exists()  # its process is gone: removed

    # A live process whose Neo4j does not answer (starting, stopping, or a reused pid): ignored, kept.
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            path.write_text(stale.model_copy(update={"pid": alive.pid}).model_dump_json())
            assert find_running(tmp_path) is None
            assert path.exists()
        finally:
            alive.kill()

    path.write_text("{not json")
    assert find_running(tmp_path) is None
