"""What an agent does over either transport: list and call every tool, read every resource and prompt.

Both transport tests run `exercise_everything` with the MCP SDK's own client, so the same checks hold
for stdio and for Streamable HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from mcp import Client
from mcp.types import CallToolResult, TextContent, TextResourceContents

from tests.integration.mcp.conftest import ROOT, SEED_NAMES, SEED_TECHNIQUES, TASK_ID, TRAJECTORY

TOOLS = {
    "search_techniques",
    "next_techniques",
    "transition_examples",
    "cypher",
    "evaluate_candidate",
    "start_evaluation",
    "evaluation_status",
    "cancel_evaluation",
    "start_optimization",
    "job_status",
    "cancel_job",
    "review_example",
    "list_tasks",
}
READER_TOOLS = TOOLS - {"review_example"}  # curator tools are not listed for readers
SEED_DEVICE = "NVIDIA H100 80GB HBM3 (sm_90)"  # every example of the seed graph was measured there
REFERENCE = (ROOT / "regraph_data" / "tasks" / TASK_ID / "reference.cpp").read_text()
# The teacher's first CUDA version of the task: it compiles (and would pass on a GPU).
CANDIDATE: str = json.loads(TRAJECTORY.read_text().splitlines()[0])["steps"][0]["code"]


@dataclass
class Progress:
    """Progress notifications received for one call."""

    messages: list[str] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.values.append(progress)
        self.messages.append(message or "")


def data(result: CallToolResult) -> dict[str, Any]:
    """A successful tool result's data: one JSON text block, not repeated as structured content."""
    assert not result.is_error, result.content
    assert result.structured_content is None  # the same data twice would double an agent's context
    [text] = result.content
    assert isinstance(text, TextContent)
    loaded: dict[str, Any] = json.loads(text.text)
    return loaded


def error_text(result: CallToolResult) -> str:
    """A failed tool result's message."""
    assert result.is_error, result.structured_content
    text = result.content[0]
    assert isinstance(text, TextContent)
    return text.text


async def read_json(client: Client, uri: str) -> dict[str, Any]:
    """A resource read as JSON."""
    contents = (await client.read_resource(uri)).contents
    assert len(contents) == 1 and isinstance(contents[0], TextResourceContents)
    loaded: dict[str, Any] = json.loads(contents[0].text)
    return loaded


async def exercise_everything(client: Client, listed: set[str]) -> dict[str, Any]:
    """List every tool (`listed`: the names this client's role sees), call every reader tool, read every
    resource and prompt; returns what later checks need."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == listed
    assert tools["cypher"].annotations is not None and tools["cypher"].annotations.read_only_hint

    found = data(await client.call_tool("search_techniques", {"query": "shared memory tiles", "k": 5}))
    assert "Shared memory tiling" in [h["technique"]["name"] for h in found["hits"]]

    listed_tasks = data(await client.call_tool("list_tasks", {}))
    assert TASK_ID in [t["id"] for t in listed_tasks["tasks"]] and listed_tasks["count"] > 10
    only = data(await client.call_tool("list_tasks", {"query": TASK_ID}))
    assert [t["id"] for t in only["tasks"]] == [TASK_ID] and only["tasks"][0]["kind"] == "function"

    following = data(await client.call_tool("next_techniques", {"code": REFERENCE, "k": 2}))
    assert following["technique"] == "sequential code"
    [successor] = following["successors"]  # the seed graph starts every path with Parallelization
    assert successor["technique"] == "Parallelization" and successor["rank"] == 1
    assert successor["stats"]["n_examples"] > 2 and "verified), success rate " in successor["evidence"]
    assert len(successor["examples"]) == 2
    similarities = [e["similarity"] for e in successor["examples"]]
    assert similarities == sorted(similarities, reverse=True)
    assert "code_before" not in successor["examples"][0]  # code only on request
    example_id = successor["examples"][0]["id"]

    # The default answer (k=1, no code) fits the default budget; ranked best supported first.
    onward_result = await client.call_tool(
        "next_techniques", {"code": REFERENCE, "technique": "Parallelization"}
    )
    [onward_text] = onward_result.content
    assert isinstance(onward_text, TextContent) and len(onward_text.text) <= 4_000
    onward = data(onward_result)
    assert len(onward["successors"]) + len(onward.get("omitted", [])) > 3
    keys = [(-s["stats"]["n_verified"], -(s["stats"]["median_speedup"] or 0)) for s in onward["successors"]]
    assert keys == sorted(keys) and [s["rank"] for s in onward["successors"]] == list(range(1, len(keys) + 1))
    # With code, within the caller's budget; what was cut is named.
    coded_result = await client.call_tool(
        "next_techniques",
        {"code": REFERENCE, "technique": "Parallelization", "k": 3, "include_code": True, "max_chars": 6000},
    )
    [coded_text] = coded_result.content
    assert isinstance(coded_text, TextContent) and len(coded_text.text) <= 6000
    coded = data(coded_result)
    assert coded["successors"][0]["examples"][0]["code_after"]
    assert coded.get("truncated") or coded.get("omitted")

    transition = {"source": "sequential code", "target": "Parallelization"}
    filtered = data(
        await client.call_tool(
            "transition_examples",
            {
                **transition,
                "device": SEED_DEVICE,
                "verdict": "passed",
                "review_status": "pending",
                "limit": 3,
            },
        )
    )
    assert len(filtered["items"]) == 3 and filtered["matching"] >= 3
    assert all(e["device"] == SEED_DEVICE and e["verdict"] == "passed" for e in filtered["items"])
    elsewhere = data(await client.call_tool("transition_examples", {**transition, "device": "Tesla T4"}))
    assert elsewhere["items"] == [] and elsewhere["matching"] == 0
    unknown = await client.call_tool("transition_examples", {"source": "sequential code", "target": "Nope"})
    assert "Nope" in error_text(unknown)

    counted = data(
        await client.call_tool(
            "cypher",
            {
                "query": "MATCH (t:Technique) WHERE t.name STARTS WITH $p RETURN count(t) AS n",
                "parameters": {"p": "Warp"},
            },
        )
    )
    warp = sum(name.startswith("Warp") for name in SEED_NAMES)
    assert warp > 0 and counted["rows"] == [{"n": warp}] and counted["truncated"] is False

    progress = Progress()
    judged = data(
        await client.call_tool(
            "evaluate_candidate", {"source": CANDIDATE, "task_ref": TASK_ID}, progress_callback=progress
        )
    )
    # The real executor without a GPU: compiled, never run, never a pass.
    assert judged["verification"] == "compile-only" and judged["passed"] is False
    assert judged["error_kind"] == "not_verified" and judged["speedup"] is None
    assert judged["verdict"]["runtime_stages"] == "not_run" and judged["verdict"]["task_id"] == TASK_ID
    assert progress.messages[0].startswith("asking the executor") and progress.values[-1] == 2
    broken = await client.call_tool("evaluate_candidate", {"source": CANDIDATE, "task_ref": "no_such_task"})
    assert "no_such_task" in error_text(broken)

    # The same evaluation as a job: started by one call, followed by another.
    evaluation = data(await client.call_tool("start_evaluation", {"source": CANDIDATE, "task_ref": TASK_ID}))
    assert evaluation["evaluation_id"].startswith("eval-") and evaluation["task_id"] == TASK_ID
    progress = Progress()
    followed = data(
        await client.call_tool(
            "evaluation_status",
            {"evaluation_id": evaluation["evaluation_id"], "wait_s": 120},
            progress_callback=progress,
        )
    )
    assert followed["state"] == "succeeded" and followed["finished"], followed
    assert {k: followed["result"][k] for k in ("verification", "passed", "error_kind")} == {
        "verification": "compile-only",
        "passed": False,
        "error_kind": "not_verified",
    }
    assert progress.messages == followed["progress"]
    assert progress.messages[0].startswith("asking the executor")
    finished = await client.call_tool("cancel_evaluation", {"evaluation_id": evaluation["evaluation_id"]})
    assert "already finished" in error_text(finished)
    unknown_task = await client.call_tool(
        "start_evaluation", {"source": CANDIDATE, "task_ref": "no_such_task"}
    )
    assert "no_such_task" in error_text(unknown_task)

    started = data(
        await client.call_tool("start_optimization", {"task_ref": TASK_ID, "budget": 4, "rollouts": 2})
    )
    job_id = started["job_id"]
    progress = Progress()
    status = data(
        await client.call_tool("job_status", {"job_id": job_id, "wait_s": 240}, progress_callback=progress)
    )
    assert status["state"] == "succeeded" and status["finished"], status
    assert status["verification"] == "compile-only" and "not measured" in status["outcome"]
    assert any(m.startswith("candidate #") for m in progress.messages), progress.messages
    assert progress.messages == status["progress"]
    assert status["progress"][-1] == "state: succeeded"
    finished = await client.call_tool("cancel_job", {"job_id": job_id})
    assert "already" in error_text(finished)

    # -- resources -----------------------------------------------------------------------------------
    static = {str(r.uri) for r in (await client.list_resources()).resources}
    assert static == {"regraph://schema", "regraph://techniques", "regraph://tasks"}
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert templates == {
        "regraph://techniques/{name}",
        "regraph://examples/{example_id}",
        "regraph://jobs/{job_id}/result",
    }
    schema = await read_json(client, "regraph://schema")
    assert "name: String" in schema["labels"]["Technique"]
    assert "(:Technique)-[:TRANSITION]->(:Technique)" in schema["patterns"]
    assert any(line.startswith("technique_text: fulltext on Technique(") for line in schema["indexes"])
    # Only what a reader's Cypher may reach: no API keys, jobs or migrations.
    assert not {"ApiKey", "Job", "JobEvent", "SchemaMigration"} & set(schema["labels"])
    assert not any("ApiKey" in line or "Job" in line for line in schema["indexes"])
    assert len(json.dumps(schema)) < 4_000  # compact enough for an agent's context
    assert TASK_ID in [t["id"] for t in (await read_json(client, "regraph://tasks"))["tasks"]]
    techniques = await read_json(client, "regraph://techniques")
    assert techniques["count"] == SEED_TECHNIQUES
    technique = await read_json(client, f"regraph://techniques/{quote('Shared memory tiling')}")
    assert technique["name"] == "Shared memory tiling" and technique["successors"]
    example = await read_json(client, f"regraph://examples/{example_id}")
    assert example["id"] == example_id and example["code_after"]
    result = await read_json(client, f"regraph://jobs/{job_id}/result")
    assert result["state"] == "succeeded"
    assert result["result"]["counts"]["total"] == len(result["result"]["search"]["candidates"]) >= 1

    # -- prompts -------------------------------------------------------------------------------------
    prompts = {p.name for p in (await client.list_prompts()).prompts}
    assert prompts == {"optimize_cuda", "next_technique"}
    plan = await client.get_prompt("optimize_cuda", {"code": REFERENCE, "task_ref": TASK_ID})
    plan_text = plan.messages[0].content
    assert isinstance(plan_text, TextContent)
    assert "next_techniques" in plan_text.text and REFERENCE.strip()[:40] in plan_text.text
    advice = await client.get_prompt("next_technique", {"code": REFERENCE})
    advice_text = advice.messages[0].content
    assert isinstance(advice_text, TextContent)
    assert "- Parallelization: " in advice_text.text and example_id in advice_text.text
    assert "verified), success rate " in advice_text.text
    return {"job_id": job_id, "example_id": example_id}
