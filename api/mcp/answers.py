"""Answers sized for an agent's context: ranked successors with one line of evidence, code only on request.

An agent calling ``next_techniques`` needs to choose a technique, not to read every example: the answer
lists the successors best supported first (verified examples, then the median speedup they measured),
each with its statistics in one line and its closest examples by id; with ``include_code`` the
examples' code comes too, cut so that the whole answer stays within the caller's character budget.
What was cut or left out is said in the answer (``truncated``, ``omitted``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from api.graph.protocol import RetrieveResponse, SuccessorPublic

DEFAULT_ANSWER_CHARS = 4000
"""The default budget of one ``next_techniques`` answer, in characters of its JSON."""

MIN_ANSWER_CHARS = 1000
MAX_ANSWER_CHARS = 100_000

_CUT_MARK = "\n… [{n} more characters: raise max_chars, or read regraph://examples/{id}]"


def ranked(successors: Sequence[SuccessorPublic]) -> list[SuccessorPublic]:
    """Best supported first: more verified examples, then a higher median speedup, then by name."""
    return sorted(
        successors,
        key=lambda s: (
            -s.transition.stats.n_verified,
            -(s.transition.stats.median_speedup or 0.0),
            s.technique,
        ),
    )


def _number(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def evidence_line(successor: SuccessorPublic) -> str:
    """One line of a transition's evidence: examples, verified share, success rate, median speedup."""
    stats = successor.transition.stats
    return (
        f"{stats.n_examples} examples ({stats.n_verified} verified), "
        f"success rate {_number(stats.success_rate, '.0%')}, "
        f"median speedup {_number(stats.median_speedup, '.3g')}x"
    )


def _size(data: Any) -> int:
    return len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def _successor(rank: int, successor: SuccessorPublic, include_code: bool) -> dict[str, Any]:
    stats = successor.transition.stats
    examples = []
    for scored in successor.examples:
        example = scored.example
        entry: dict[str, Any] = {
            "id": example.id,
            "task_id": example.task_id,
            "similarity": round(scored.similarity, 3),
            "speedup": example.speedup,
            "verdict": example.verdict.value if example.verdict is not None else None,
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
    found: RetrieveResponse, *, include_code: bool = False, max_chars: int = DEFAULT_ANSWER_CHARS
) -> dict[str, Any]:
    """`found`'s successors ranked, each with one line of evidence, within `max_chars` of JSON."""
    successors = [
        _successor(rank, s, include_code) for rank, s in enumerate(ranked(found.successors), start=1)
    ]
    answer: dict[str, Any] = {
        "technique": found.technique,
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
