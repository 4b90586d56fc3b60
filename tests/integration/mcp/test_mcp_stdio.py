"""``regraph mcp`` over stdio, launched by the MCP SDK's own client as a coding agent would launch it.

The command connects to the session's Neo4j (REGRAPH_NEO4J_URI, holding the seed graph) and to the
real executor on loopback (REGRAPH_EXECUTOR_URL, compile-only), with the replay model standing in
for the LLM; its role comes from the API key it is given.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from graphdb.embedded import free_port
from graphdb.models import Role
from tests.integration.mcp.conftest import ROOT, SeededGraph
from tests.integration.mcp.scenario import READER_TOOLS, TOOLS, data, exercise_everything

pytestmark = pytest.mark.neo4j


def _environment(seeded: SeededGraph, executor_url: str, replay_path: Path, data_dir: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("REGRAPH_")}
    return {
        **keep,
        "REGRAPH_NEO4J_URI": seeded.target.uri,
        "REGRAPH_NEO4J_PASSWORD": seeded.target.password,
        "REGRAPH_DATA_DIR": str(data_dir),
        "REGRAPH_SEED_GRAPH": "none",
        "REGRAPH_PRELOAD_RETRIEVAL": "false",
        "REGRAPH_EXECUTOR_URL": executor_url,
        "REGRAPH_MODELS__GENERATOR__BACKEND": "replay",
        "REGRAPH_MODELS__GENERATOR__REPLAY_PATH": str(replay_path),
        "REGRAPH_LOG_LEVEL": "WARNING",
    }


COMMAND = [sys.executable, "-m", "regraph_cli", "mcp"]


def test_every_tool_resource_and_prompt_over_stdio(
    seeded: SeededGraph, executor_url: str, replay_path: Path, tmp_path: Path
) -> None:
    env = _environment(seeded, executor_url, replay_path, tmp_path)
    env["REGRAPH_API_KEY"] = seeded.tokens[Role.CURATOR]
    server = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:], env=env, cwd=str(ROOT))

    async def scenario() -> None:
        async with Client(server) as client:
            assert client.server_info is not None and client.server_info.name == "regraph"
            seen = await exercise_everything(client, TOOLS)  # a curator's key: every tool
            rejected = data(
                await client.call_tool(
                    "review_example",
                    {"example_id": seen["example_id"], "decision": "reject", "reason": "stdio"},
                )
            )
            assert rejected["review_status"] == "rejected"

    anyio.run(scenario)
    audit = "MATCH (a:AuditEntry {actor: 'mcp-curator', action: 'example.rejected'}) RETURN count(a)"
    assert seeded.count(audit) == 1


def test_a_wrong_api_key_stops_the_stdio_server_with_a_clear_error(
    seeded: SeededGraph, executor_url: str, replay_path: Path, tmp_path: Path
) -> None:
    env = {**_environment(seeded, executor_url, replay_path, tmp_path), "REGRAPH_API_KEY": "rg_wrong"}
    # The client keeps stdin open: the server stops by itself once it finds the key wrong.
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            COMMAND, env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr
        )
        try:
            process.wait(timeout=240)
        finally:
            process.kill()
            assert process.stdin is not None
            process.stdin.close()
    assert process.returncode == 1
    assert b"the API key is not valid" in err.read_bytes()
    assert out.read_bytes() == b""  # nothing but the protocol ever goes to stdout


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_server_answers_before_its_stack_is_open_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """A coding agent waits seconds for a server: the handshake and the tool list come before the graph
    (here a Neo4j that never answers) is open; once the client goes away, the executor the server
    started is gone within 5 s."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith("REGRAPH_")}
    executor_port = free_port()
    env = {
        **keep,
        "REGRAPH_NEO4J_URI": f"bolt://127.0.0.1:{free_port()}",  # nothing listens: the opening waits
        "REGRAPH_NEO4J_PASSWORD": "unused",
        "REGRAPH_DATA_DIR": str(tmp_path),
        "REGRAPH_EXECUTOR_RUNTIME": "host",
        "REGRAPH_LOG_LEVEL": "WARNING",
    }
    server = StdioServerParameters(
        command=COMMAND[0], args=[*COMMAND[1:], "--executor-port", str(executor_port)], env=env, cwd=str(ROOT)
    )

    async def agent() -> None:
        started = time.monotonic()
        async with Client(server) as client:
            assert client.server_info is not None and client.server_info.name == "regraph"
            assert {t.name for t in (await client.list_tools()).tools} == READER_TOOLS
            # The opening waits 60 s for that Neo4j before it gives up: a server that opened its stack
            # before answering could not have listed its tools within 45 s (an order, not a speed).
            assert time.monotonic() - started < 45
            for _ in range(300):  # the executor it started comes up meanwhile
                if _listening(executor_port):
                    break
                await anyio.sleep(0.2)
            assert _listening(executor_port)

    anyio.run(agent)
    gone_by = time.monotonic() + 5
    while _listening(executor_port) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert not _listening(executor_port), "the executor outlived the MCP server's client"
