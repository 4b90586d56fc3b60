"""The Cypher console of the curation workspace: the documented example queries, and a reader's query
run under the same limits and slots as ``/v1/cypher`` and the MCP tool."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from api.auth import ANONYMOUS
from api.cypher.models import CypherRequest
from api.deps import StateDep
from api.settings import default_cypher_examples
from api.ui.render import without_vectors
from api.ui.visitor import SERVICE_ERRORS, VisitDep, WriteDep, problem, run_reader_cypher

DEFAULT_QUERY = "MATCH (t:Technique) RETURN t.name AS name ORDER BY name LIMIT 25"

router = APIRouter(prefix="/ui", include_in_schema=False)


def cypher_examples(path: Path | None = None) -> list[dict[str, Any]]:
    """The documented example queries (``path``, by default the checkout's docs/cypher-examples.md):
    each `## title`, its ```cypher block and ```json parameters."""
    path = path or default_cypher_examples()
    if not path.is_file():
        return []
    out = []
    for section in re.split(r"^## ", path.read_text(), flags=re.MULTILINE)[1:]:
        title = section.splitlines()[0].strip()
        query = re.search(r"```cypher\n(.*?)```", section, re.DOTALL)
        params = re.search(r"```json\n(.*?)```", section, re.DOTALL)
        if query is not None:
            out.append(
                {
                    "title": title,
                    "query": query.group(1).strip(),
                    "parameters": params.group(1).strip() if params else "{}",
                }
            )
    return out


@lru_cache(maxsize=4)
def _documented(path: Path) -> list[dict[str, Any]]:
    # Read once per file: the examples ship with the code (settings.cypher_examples_path).
    return cypher_examples(path)


@router.get("/cypher")
def cypher_page(visit: VisitDep, example: int | None = None) -> HTMLResponse:
    examples = _documented(visit.settings.cypher_examples_path)
    chosen = examples[example] if example is not None and 0 <= example < len(examples) else None
    return visit.render(
        "cypher.html",
        nav="cypher",
        examples=examples,
        query=chosen["query"] if chosen else DEFAULT_QUERY,
        parameters=chosen["parameters"] if chosen else "{}",
        result=None,
        error=None,
    )


@router.post("/cypher")
async def cypher_run(visit: WriteDep, state: StateDep) -> HTMLResponse:
    query, parameters = visit.field("query"), visit.field("parameters") or "{}"
    result = None
    error: dict[str, Any] | None = None
    try:
        body = CypherRequest(query=query, parameters=json.loads(parameters))
    except (ValueError, ValidationError) as e:
        error = {"type": "invalid_request", "message": f"the query or its parameters are not valid: {e}"}
    else:
        try:  # the same slots as /v1/cypher and the MCP tool (api/limits.py)
            result = await run_reader_cypher(
                state,
                visit.caller.key_id or ANONYMOUS,
                body,
                disconnected=visit.request.is_disconnected,
            )
        except SERVICE_ERRORS as e:
            api = problem(e)
            error = {"type": api.error_type, "status": api.status_code, "message": api.message}
    if result is not None:  # the console shows nodes without their embedding vectors
        result = result.model_copy(update={"rows": [without_vectors(row) for row in result.rows]})
    return visit.render(
        "cypher.html",
        nav="cypher",
        examples=_documented(visit.settings.cypher_examples_path),
        query=query,
        parameters=parameters,
        result=result,
        error=error,
    )
