"""A reader cannot read the executor host's files through `evaluate_candidate` (issue 27, High): the
MCP SDK's client, a reader key, the real API and the real (compile-only) executor on loopback; each
include trick of the issue names a world-readable token beside the executor, and no answer holds it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from api.app import create_app
from graphdb.models import Role
from tests.integration.mcp.conftest import ROOT, SeededGraph
from tests.integration.mcp.http_stack import Stack, api_settings, connect
from tests.support.servers import serve_in_thread
from tests.unit.executor.test_executor_jail import LIBRARY, SECRET, tricks

pytestmark = pytest.mark.neo4j

TASKS = ROOT / "tests" / "unit" / "executor" / "fixtures" / "tasks"


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("beside-the-executor")
    where.chmod(0o755)
    where.parent.chmod(0o755)
    path = where / "admin-token.txt"
    path.write_text(f"{SECRET}\n")
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def stack(
    seeded: SeededGraph, executor_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    settings = api_settings(seeded, executor_url, tmp_path_factory.mktemp("api-data"), tasks_dir=TASKS)
    with serve_in_thread(create_app(settings)) as url:
        yield Stack(url, seeded)


def test_no_include_trick_shows_a_host_file_to_a_reader(stack: Stack, secret: Path) -> None:
    answers: dict[str, str] = {}

    async def scenario() -> None:
        async with connect(stack, {"X-API-Key": stack.graph.tokens[Role.READER]}) as client:
            for name, trick in tricks(secret).items():
                result = await client.call_tool(
                    "evaluate_candidate", {"source": trick + LIBRARY, "task_ref": "saxpy"}
                )
                answers[name] = json.dumps(
                    [block.model_dump(mode="json") for block in result.content]
                ) + json.dumps(result.structured_content)

    anyio.run(scenario)
    assert set(answers) == set(tricks(secret))
    for name, answer in answers.items():
        assert SECRET not in answer, (name, answer[:2000])
        assert '"passed":true' not in answer.replace(" ", ""), name
