"""``regraph mcp`` over stdio, launched by the MCP SDK's own client as a coding agent would launch it.

The command connects to the session's Neo4j (REGRAPH_NEO4J_URI, holding the seed graph) and to the
real executor on loopback (REGRAPH_EXECUTOR_URL, compile-only), with the replay model standing in
for the LLM; its role comes from the API key it is given.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from graphdb.models import Role
from tests.integration.mcp.conftest import ROOT, SeededGraph
from tests.integration.mcp.scenario import TOOLS, data, exercise_everything

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
    done = subprocess.run(
        COMMAND, env=env, cwd=ROOT, input=b"", capture_output=True, timeout=240, check=False
    )
    assert done.returncode == 1
    assert b"the API key is not valid" in done.stderr
    assert done.stdout == b""  # nothing but the protocol ever goes to stdout
