"""Retrieval as an MCP tool and prompt: the techniques to try next for a code, sized for an agent's context.

``next_techniques`` asks the retrieval the graph search (MCGS) uses, `search.retrieval.GraphKnowledge`
(the `KnowledgeSource` the policy's prompts are built from): the successors of a technique with the
examples whose code is closest to the agent's; the statistics of each transition come with them. The
answer lists the successors best supported first (verified examples, then the median speedup they
measured), each with its statistics in one line and its closest examples by id; with ``include_code``
the examples' code comes too, cut so that the whole answer stays within the caller's character budget.
What was cut or left out is said in the answer (``truncated``, ``omitted``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field, ValidationError

from api.errors import ServiceError, ServiceErrorKind, ServiceUnavailableError
from api.mcp.service import ReasoningGraphService
from api.mcp.tools import READ_ONLY, McpTools
from api.retrieve.models import RetrieveRequest
from graphdb.errors import TechniqueNotFoundError
from graphdb.models import INITIAL_TECHNIQUE, TransitionStats
from search.embeddings import EmbeddingError
from search.errors import KnowledgeError
from search.protocols import RetrievedExample
from search.retrieval import GraphKnowledge

DEFAULT_ANSWER_CHARS = 4000
"""The default budget of one ``next_techniques`` answer, in characters of its JSON."""

MIN_ANSWER_CHARS = 1000
MAX_ANSWER_CHARS = 100_000

_CUT_MARK = "\n… [{n} more characters: raise max_chars, or read regraph://examples/{id}]"


@dataclass(frozen=True)
class SuccessorEvidence:
    """One successor as the search's retrieval found it: its examples closest to the code (as MCGS sees
    them) and the statistics of the transition to it."""

    technique: str
    stats: TransitionStats
    examples: list[RetrievedExample]


def ranked(successors: Sequence[SuccessorEvidence]) -> list[SuccessorEvidence]:
    """Best supported first: more verified examples, then a higher median speedup, then by name."""
    return sorted(
        successors,
        key=lambda s: (-s.stats.n_verified, -(s.stats.median_speedup or 0.0), s.technique),
    )


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def evidence_line(successor: SuccessorEvidence) -> str:
    """One line of a transition's evidence: examples, verified share, success rate, median speedup."""
    stats = successor.stats
    return (
        f"{stats.n_examples} examples ({stats.n_verified} verified), "
        f"success rate {_number(stats.success_rate, '.0%')}, "
        f"median speedup {_number(stats.median_speedup, '.3g')}x"
    )


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def _successor(rank: int, successor: SuccessorEvidence, include_code: bool) -> dict[str, Any]:
    stats = successor.stats
    examples = []
    for example in successor.examples:
        entry: dict[str, Any] = {
            "id": example.id,
            "task_id": example.task_id,
            "similarity": round(example.similarity, 3) if example.similarity is not None else None,
            "speedup": example.speedup,
        }
        if include_code:
            entry["detail"] = example.detail
            entry["code_before"] = example.code_before
            entry["code_after"] = example.code_after
        examples.append(entry)
    return {
        "rank": rank,
        "technique": successor.technique,
        "evidence": evidence_line(successor),
        "stats": {
            "n_examples": stats.n_examples,
            "n_verified": stats.n_verified,
            "success_rate": stats.success_rate,
            "median_speedup": stats.median_speedup,
        },
        "examples": examples,
    }


_CODE_FIELDS = ("code_before", "code_after", "detail")


def _cut_code(successors: list[dict[str, Any]], budget: int) -> list[str]:
    """Cut the examples' code fields so their total length fits `budget`; returns what was cut."""
    fields = [(e, f) for s in successors for e in s["examples"] for f in _CODE_FIELDS if e.get(f)]
    if not fields:
        return []
    cut: list[str] = []
    # Equal shares, the share of a field shorter than it handed on to the longer ones.
    remaining, left = max(budget, 0), len(fields)
    for entry, name in sorted(fields, key=lambda ef: len(ef[0][ef[1]])):
        share = remaining // left
        text: str = entry[name]
        if len(text) > share:
            mark = _CUT_MARK.format(n=len(text) - share, id=entry["id"])
            keep = max(share - len(mark), 0)
            entry[name] = text[:keep] + _CUT_MARK.format(n=len(text) - keep, id=entry["id"])
            cut.append(f"{entry['id']}.{name}")
        remaining -= len(entry[name])
        left -= 1
    return cut


def concise_successors(
    technique: str,
    found: Sequence[SuccessorEvidence],
    *,
    include_code: bool = False,
    max_chars: int = DEFAULT_ANSWER_CHARS,
) -> dict[str, Any]:
    """The successors of `technique` ranked, each with one line of evidence, within `max_chars` of JSON."""
    successors = [_successor(rank, s, include_code) for rank, s in enumerate(ranked(found), start=1)]
    answer: dict[str, Any] = {
        "technique": technique,
        "successors": successors,
        "ranking": "more verified examples first, then a higher median speedup",
    }
    if include_code:
        originals = [{f: e[f] for f in _CODE_FIELDS if e.get(f)} for s in successors for e in s["examples"]]
        entries = [e for s in successors for e in s["examples"]]
        skeleton = [
            {**s, "examples": [{k: v for k, v in e.items() if k not in _CODE_FIELDS} for e in s["examples"]]}
            for s in successors
        ]
        room = max_chars - _size({**answer, "successors": skeleton}) - 300  # the notes that may follow
        # JSON escapes (newlines, quotes) make the text longer than its characters: cut, measure, cut more.
        for _ in range(6):
            for entry, code in zip(entries, originals, strict=True):
                entry.update(code)
            cut = _cut_code(successors, room)
            overflow = _size(answer) + 100 - max_chars
            if overflow <= 0 or room <= 0:
                break
            room -= overflow + 50
        if cut:
            answer["truncated"] = f"{len(cut)} code fields cut to fit max_chars (each says how much)"
    else:
        answer["code"] = "left out: call again with include_code=true (and a max_chars budget)"
    omitted: list[str] = []
    while len(successors) > 1 and _size(answer) > max_chars:
        omitted.insert(0, successors.pop()["technique"])
        answer["omitted"] = omitted
        answer["omitted_note"] = "lower-ranked successors left out to stay within max_chars"
    if include_code and _size(answer) > max_chars:  # even one successor's cut code does not fit
        for entry in (e for s in successors for e in s["examples"]):
            for name in _CODE_FIELDS:
                entry.pop(name, None)
        answer.pop("truncated", None)
        answer["code"] = "left out: max_chars is too small for code; read regraph://examples/<id>"
    return answer


async def suggest(
    s: ReasoningGraphService,
    code: str,
    technique: str,
    k: int,
    *,
    include_code: bool = False,
    max_chars: int = DEFAULT_ANSWER_CHARS,
) -> dict[str, Any]:
    """Successors of `technique` for `code`, ranked, each with one line of evidence and its top-`k`
    examples as MCGS retrieves them; the examples' code only with `include_code`, within `max_chars`."""
    try:
        request = RetrieveRequest(technique=technique or INITIAL_TECHNIQUE, code=code, k=k)
    except ValidationError as e:
        raise ServiceError(f"invalid arguments: {e}", kind=ServiceErrorKind.INVALID) from e
    # The search's own retrieval, over the tools' store (its reads carry the read time limit).
    knowledge = GraphKnowledge(s.graph.retrieval.store, s.graph.retrieval.embedder)
    try:
        options = await s.read(knowledge.successors, request.technique, request.code, request.k)
    except KnowledgeError as e:
        unknown = isinstance(e.__cause__, TechniqueNotFoundError)
        raise ServiceError(
            str(e), kind=ServiceErrorKind.NOT_FOUND if unknown else ServiceErrorKind.UNAVAILABLE
        ) from e
    except EmbeddingError as e:
        raise ServiceUnavailableError(f"the code could not be embedded: {e}") from e
    # The transitions' statistics (k=0 reads no example and embeds nothing).
    transitions = await s.read(s.graph.retrieval.store.successors, request.technique, [], 0)
    stats = {t.transition.target: t.transition.stats for t in transitions}
    found = [
        SuccessorEvidence(o.technique, stats[o.technique], list(o.examples))
        for o in options
        if o.technique in stats
    ]
    data = concise_successors(request.technique, found, include_code=include_code, max_chars=max_chars)
    if not found:
        data["note"] = (
            f"the graph has no transition out of {request.technique!r}; search the techniques "
            "(search_techniques) for the name the graph uses"
        )
    return data


def register(server: MCPServer, tools: McpTools) -> None:
    """Add retrieval's tool and prompt to `server`."""

    @server.tool(annotations=READ_ONLY)
    async def next_techniques(
        code: Annotated[str, Field(min_length=1, description="the current source code (CUDA or C++)")],
        ctx: Context,
        technique: Annotated[
            str, Field(description=f"the technique the code is at now; '{INITIAL_TECHNIQUE}' to start")
        ] = INITIAL_TECHNIQUE,
        k: Annotated[int, Field(ge=1, le=10, description="closest examples per successor technique")] = 1,
        include_code: Annotated[
            bool, Field(description="also the examples' code before/after (cut to fit max_chars)")
        ] = False,
        max_chars: Annotated[
            int,
            Field(
                ge=MIN_ANSWER_CHARS,
                le=MAX_ANSWER_CHARS,
                description="the answer's size budget, in characters",
            ),
        ] = DEFAULT_ANSWER_CHARS,
    ) -> CallToolResult:
        """The techniques to try next for this code, best supported first: successors of `technique` in the
        graph, each with one line of evidence (examples, verified, success rate, median speedup) and the ids
        of the examples whose code is closest to yours (the retrieval the graph search uses). Code only with
        include_code=true, cut to the max_chars budget; or read one example as regraph://examples/<id>."""
        return await tools.call(
            ctx, lambda s: suggest(s, code, technique, k, include_code=include_code, max_chars=max_chars)
        )

    @server.prompt(name="next_technique", title="Explain which technique to try next and why")
    async def next_technique(code: str, ctx: Context, technique: str = INITIAL_TECHNIQUE) -> str:
        """The graph's successors of `technique` for this code, with the evidence, and a request to choose."""
        try:
            await tools.ready()
            found = await suggest(tools.service(ctx), code, technique, 1)
        except (ServiceError, ToolError) as e:
            found = {"successors": [], "note": f"the graph could not be asked: {e}"}
        lines = []
        for successor in found.get("successors", []):  # ranked by the service, best supported first
            closest = successor["examples"][0] if successor["examples"] else None
            lines.append(
                f"- {successor['technique']}: {successor['evidence']}"
                + (
                    f"; closest example {closest['id']} (similarity {closest['similarity']:.2f}, "
                    f"task {closest['task_id']})"
                    if closest
                    else ""
                )
            )
        evidence = "\n".join(lines) or f"(none: {found.get('note', 'no transition out of this technique')})"
        return (
            f"The code below is at the technique '{technique}'. The reasoning graph records these next "
            f"techniques, with how they fared on other code:\n{evidence}\n\n"
            "Explain which technique to try next for this code and why: weigh the statistics against what the "
            "code does (memory access pattern, divergence, arithmetic intensity), and read the closest example "
            "(resource regraph://examples/<id>) before deciding. Say what you would change in the code.\n\n"
            f"```cuda\n{code}\n```"
        )
