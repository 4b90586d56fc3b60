"""The MCP server at the API's ``/mcp`` (Streamable HTTP), with the MCP SDK's own client, on the real stack:
the API on the session's Neo4j with the seed graph, the real executor (compile-only) and the replay model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from api.app import create_app
from graphdb.connection import OpenGraph
from graphdb.models import Role
from search.backends.config import ModelRoles, RoleConfig
from tests.integration.mcp.conftest import ROOT, SEED_TECHNIQUES, TASK_ID, SeededGraph
from tests.integration.mcp.http_stack import Stack, api_settings, connect
from tests.integration.mcp.scenario import (
    CANDIDATE,
    READER_TOOLS,
    TOOLS,
    data,
    error_text,
    exercise_everything,
)
from tests.support.servers import serve_in_thread
from tests.support.stopped import stopped_state

pytestmark = pytest.mark.neo4j

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-http", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def stack(
    seeded: SeededGraph, executor_url: str, replay_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    replay = ModelRoles(generator=RoleConfig(backend="replay", replay_path=replay_path))
    settings = api_settings(seeded, executor_url, tmp_path_factory.mktemp("api-data"), models=replay)
    with serve_in_thread(create_app(settings)) as url:
        yield Stack(url, seeded)


def test_every_tool_resource_and_prompt_over_streamable_http(stack: Stack) -> None:
    async def scenario() -> None:
        headers = {"X-API-Key": stack.graph.tokens[Role.READER]}
        async with connect(stack, headers) as client:
            await exercise_everything(client, READER_TOOLS)

    anyio.run(scenario)


def test_requests_without_a_valid_key_are_refused_before_mcp(stack: Stack) -> None:
    for headers in ({}, {"X-API-Key": "rg_not-a-key"}, {"Authorization": "Bearer rg_not-a-key"}):
        response = httpx.post(f"{stack.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        assert response.status_code == 401, headers
        assert response.json()["error"]["type"] == "unauthorized"
        assert response.headers["www-authenticate"].startswith("Bearer")
    # The same key works as a bearer token, as on the API's routes.
    token = stack.graph.tokens[Role.READER]
    response = httpx.post(
        f"{stack.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200

    async def sdk_client_without_key() -> None:
        async with connect(stack, {}) as client:
            await client.list_tools()

    # The SDK's client surfaces the 401 as an error response to its first request (inside task groups).
    with pytest.raises(BaseExceptionGroup) as refused:
        anyio.run(sdk_client_without_key)
    assert refused.group_contains(MCPError, match="error response", depth=None)


def test_curator_tools_are_hidden_from_readers_and_refused_to_them(stack: Stack) -> None:
    example_id = _an_example(stack.graph)

    async def scenario() -> None:
        async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.READER]}) as reader:
            assert {t.name for t in (await reader.list_tools()).tools} == READER_TOOLS
            # Called anyway (a client that guessed the name), even with arguments the tool would refuse.
            for arguments in ({"example_id": example_id, "decision": "reject"}, {"example_id": 7}):
                refused = await reader.call_tool("review_example", arguments)
                assert "review_example: this tool needs an API key with the curator role" in error_text(
                    refused
                )
                assert "'mcp-reader' (reader)" in error_text(refused)
        for role in (Role.CURATOR, Role.ADMIN):
            async with connect(stack, {"X-API-Key": stack.graph.tokens[role]}) as client:
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS, role
        async with connect(stack, {"Authorization": f"Bearer {stack.graph.tokens[Role.CURATOR]}"}) as curator:
            approved = data(
                await curator.call_tool(
                    "review_example", {"example_id": example_id, "decision": "approve", "reason": "read it"}
                )
            )
            assert approved["review_status"] == "approved" and approved["review_reason"] == "read it"

    anyio.run(scenario)
    assert stack.graph.count("MATCH (a:AuditEntry {actor: 'mcp-reader'}) RETURN count(a)") == 0
    assert (
        stack.graph.count(
            f"MATCH (e:Example {{id: '{example_id}'}}) WHERE e.review_status = 'approved' RETURN count(e)"
        )
        == 1
    )
    assert (
        stack.graph.count(
            f"MATCH (a:AuditEntry {{target: 'example:{example_id}', actor: 'mcp-curator', action: 'example.approved'}}) "
            "RETURN count(a)"
        )
        == 1
    )


WRITES = [
    "CREATE (n:Intruder {name: 'x'}) RETURN n",
    "MATCH (t:Technique) DETACH DELETE t",
    "MATCH (t:Technique) SET t.name = 'renamed' RETURN t",
    "MERGE (n:Intruder) RETURN n",
    "MATCH (e:Example) REMOVE e.code_after RETURN count(e)",
    "CALL dbms.components()",
    "DROP INDEX technique_text",
    "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
    "MATCH (t:Technique) CALL (t) { DETACH DELETE t } IN TRANSACTIONS RETURN 1",
    "MATCH (k:ApiKey) RETURN k.key_hash",  # a read, but of secrets: refused by Neo4j's EXPLAIN check
]


def test_cypher_writes_and_secret_reads_are_refused_and_change_nothing(stack: Stack) -> None:
    everything = "MATCH (n) OPTIONAL MATCH (n)-[r]->() RETURN count(DISTINCT n) + count(r)"
    before = stack.graph.count(everything)
    properties = stack.graph.count("MATCH (e:Example) WHERE e.code_after IS NOT NULL RETURN count(e)")

    async def scenario() -> None:
        async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.CURATOR]}) as client:
            for query in WRITES:
                refused = await client.call_tool("cypher", {"query": query})
                assert "refused" in error_text(refused), query

    anyio.run(scenario)
    assert stack.graph.count(everything) == before
    assert stack.graph.count("MATCH (e:Example) WHERE e.code_after IS NOT NULL RETURN count(e)") == properties
    assert stack.graph.count("MATCH (n:Intruder) RETURN count(n)") == 0


def test_oversized_results_are_capped_with_a_note(stack: Stack) -> None:
    async def scenario() -> None:
        async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.READER]}) as client:
            many = data(await client.call_tool("cypher", {"query": "UNWIND range(1, 5000) AS i RETURN i"}))
            assert len(many["rows"]) == 1000 and many["truncated"] is True
            assert "only the first 1000 rows" in many["note"]

            # 40 rows of 20,000 characters: far over the 40,000-character result limit.
            wide = data(
                await client.call_tool(
                    "cypher",
                    {
                        "query": "UNWIND range(1, 40) AS i RETURN i, reduce(s = '', x IN range(1, 2000) | s + '0123456789') AS s"
                    },
                )
            )
            assert len(json.dumps(wide)) <= 40_000
            assert "result cut to fit 40000 characters" in wide["note"]
            assert wide["rows"][0]["s"].endswith("more characters]")
            assert wide["rows"][0]["i"] == 1

            examples = data(
                await client.call_tool(
                    "transition_examples",
                    {"source": "sequential code", "target": "Parallelization", "limit": 100},
                )
            )
            assert len(json.dumps(examples)) <= 40_000 and "result cut" in examples["note"]

    anyio.run(scenario)


def test_a_running_job_is_cancelled_over_mcp_by_its_owner_only(stack: Stack) -> None:
    async def scenario() -> None:
        async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.READER]}) as client:
            started = data(
                await client.call_tool(
                    "start_optimization", {"task_ref": TASK_ID, "budget": 50, "rollouts": 50}
                )
            )
            job_id = started["job_id"]
            cancelled = data(await client.call_tool("cancel_job", {"job_id": job_id}))
            assert cancelled["state"] == "cancelled" and cancelled["finished"]
            # Another key (a curator's, not an admin's) neither sees nor cancels nor reads the job.
            async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.CURATOR]}) as other:
                for tool in ("job_status", "cancel_job"):
                    refused = await other.call_tool(tool, {"job_id": job_id})
                    assert "not found" in error_text(refused), tool
                with pytest.raises(Exception, match="not found"):
                    await other.read_resource(f"regraph://jobs/{job_id}/result")
            async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.ADMIN]}) as admin:
                assert data(await admin.call_tool("job_status", {"job_id": job_id}))["state"] == "cancelled"
            unknown = await client.call_tool("job_status", {"job_id": "no-such-job"})
            assert "no-such-job" in error_text(unknown)

    anyio.run(scenario)


def test_an_evaluation_job_is_cancelled_by_its_owner_and_unknown_to_other_keys(stack: Stack) -> None:
    async def scenario() -> None:
        async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.READER]}) as client:
            # A source the executor has not built yet (it keeps the builds of sources it compiled).
            fresh = f"{CANDIDATE}\n// {uuid.uuid4().hex}\n"
            started = data(await client.call_tool("start_evaluation", {"source": fresh, "task_ref": TASK_ID}))
            evaluation_id = started["evaluation_id"]
            # Cancelled at once, while the executor compiles it, by its owner.
            cancelled = data(await client.call_tool("cancel_evaluation", {"evaluation_id": evaluation_id}))
            assert cancelled["state"] == "cancelled" and cancelled["result"] is None, cancelled
            async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.CURATOR]}) as other:
                for tool in ("evaluation_status", "cancel_evaluation"):
                    refused = await other.call_tool(tool, {"evaluation_id": evaluation_id})
                    assert "not found" in error_text(refused), tool
            async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.ADMIN]}) as admin:
                seen = data(await admin.call_tool("evaluation_status", {"evaluation_id": evaluation_id}))
                assert seen["state"] == "cancelled"

    anyio.run(scenario)


INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"


def _inspector(stack: Stack, *arguments: str) -> dict[str, Any]:
    token = stack.graph.tokens[Role.READER]
    command = [str(INSPECTOR), "--cli", f"{stack.url}/mcp", "--transport", "http"]
    command += ["--header", f"X-API-Key: {token}", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_the_mcp_inspector_lists_the_tools_and_calls_two(stack: Stack) -> None:
    # A client nobody here wrote: the MCP Inspector's CLI mode (npm, pinned in package.json).
    assert INSPECTOR.exists(), "the MCP Inspector is installed by scripts/bootstrap.sh (npm ci)"
    listed = _inspector(stack, "--method", "tools/list")
    assert {t["name"] for t in listed["tools"]} == READER_TOOLS  # a reader's key
    found = _inspector(
        stack,
        "--method",
        "tools/call",
        "--tool-name",
        "search_techniques",
        "--tool-arg",
        "query=warp shuffle",
    )
    assert not found.get("isError")
    hits = _inspector_data(found)["hits"]
    assert hits and hits[0]["technique"]["name"].startswith("Warp")
    counted = _inspector(
        stack,
        "--method",
        "tools/call",
        "--tool-name",
        "cypher",
        "--tool-arg",
        "query=MATCH (t:Technique) RETURN count(t) AS n",
    )
    assert _inspector_data(counted)["rows"] == [{"n": SEED_TECHNIQUES}]


def _inspector_data(result: dict[str, Any]) -> dict[str, Any]:
    """A tool result's data as the Inspector prints it: one JSON text block, no structured copy."""
    assert "structuredContent" not in result
    [block] = result["content"]
    assert block["type"] == "text"
    data: dict[str, Any] = json.loads(block["text"])
    return data


def _an_example(graph: SeededGraph) -> str:
    with graph.driver.session(database=graph.target.database) as session:
        record = session.run(
            "MATCH (e:Example) WHERE e.review_status = 'pending' RETURN e.id AS id ORDER BY id LIMIT 1"
        ).single(strict=True)
        example_id: str = record["id"]
        return example_id


# -- time limits on the graph: the API with a 1 s MCP read limit and anonymous reading on ------------------

READ_LIMIT_S = 1.0


@pytest.fixture(scope="module")
def tight(
    seeded: SeededGraph, executor_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    # Anonymous reading on: a request without a key never reads the graph before the tool does.
    settings = api_settings(seeded, executor_url, tmp_path_factory.mktemp("api-tight"), anonymous_read=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REGRAPH_MCP_READ_TIMEOUT_S", str(READ_LIMIT_S))
        app = create_app(settings)
    with serve_in_thread(app) as url:
        yield Stack(url, seeded)


def test_graph_work_past_the_limit_is_stopped_by_the_server(tight: Stack) -> None:
    # The example's node stays locked by another transaction: the tool's write waits for the lock until
    # Neo4j stops it at the server-side timeout (the tool's own backstop would come 5 s later).
    example_id = _an_example(tight.graph)
    with tight.graph.driver.session(database=tight.graph.target.database) as session:
        holder = session.begin_transaction()
        holder.run("MATCH (e:Example {id: $id}) SET e.review_reason = 'held'", id=example_id).consume()

        async def scenario() -> tuple[str, float]:
            async with connect(tight, {"X-API-Key": tight.graph.tokens[Role.CURATOR]}) as curator:
                started = time.monotonic()
                with anyio.move_on_after(30):  # only if nothing stops the wait
                    stopped = await curator.call_tool(
                        "review_example", {"example_id": example_id, "decision": "reject"}
                    )
                    return error_text(stopped), time.monotonic() - started
                return "no answer", time.monotonic() - started

        try:
            message, seconds = anyio.run(scenario)
        finally:
            holder.rollback()
    assert "the graph database stopped a write that ran past its 1 s limit" in message, message
    assert "REGRAPH_MCP_READ_TIMEOUT_S=1" in message
    assert seconds < READ_LIMIT_S + 4, seconds  # Neo4j checks timeouts every 2 s
    assert tight.graph.count(f"MATCH (e:Example {{id: '{example_id}'}}) RETURN e.review_status = 'pending'")


@pytest.fixture()
def neo4j_process(open_test_graph: OpenGraph) -> int:
    """The pid of the session's embedded Neo4j (a test that stops it needs it on this machine)."""
    embedded = open_test_graph.server.embedded
    if embedded is None or embedded.pid is None:
        pytest.skip("the session's Neo4j is external: it cannot be paused from here")
    return embedded.pid


def test_a_graph_that_does_not_answer_gives_a_tool_error_in_bounded_time(
    tight: Stack, neo4j_process: int
) -> None:
    async def ask(client: Client) -> tuple[Any, float]:
        started = time.monotonic()
        with anyio.move_on_after(30):  # only if the tool never gives up
            return await client.call_tool(
                "search_techniques", {"query": "tiling"}
            ), time.monotonic() - started
        return None, time.monotonic() - started

    async def scenario() -> None:
        async with connect(tight, {}) as client:  # anonymous: the gate reads nothing from the graph
            assert data((await ask(client))[0])["hits"]
            os.kill(neo4j_process, signal.SIGSTOP)  # the JVM stops: Bolt accepts bytes, nothing answers
            try:
                # kill() returns before every thread has stopped: ask once the process is stopped
                state = stopped_state(neo4j_process)
                answer, seconds = await ask(client)
            finally:
                os.kill(neo4j_process, signal.SIGCONT)
            assert answer is not None, f"the tool gave no answer in {seconds:.0f} s"
            # A run in session 31's CI got an answer with the graph stopped: say what came back.
            assert answer.is_error, (
                f"answered in {seconds:.2f} s, the JVM in state {state!r}: {str(answer.content)[:300]}"
            )
            assert "the graph database did not answer within 6 s" in error_text(answer)
            assert seconds < READ_LIMIT_S + 5 + 3, seconds
            assert data((await ask(client))[0])["hits"]  # answering again once Neo4j runs

    anyio.run(scenario)
