"""Rows read from Neo4j to the package's models and models to node properties (no queries here)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from neo4j.time import DateTime as Neo4jDateTime

from graphdb import store_queries as q
from graphdb.models import (
    AuditEntry,
    Example,
    RelabelDecision,
    ScoredExample,
    Technique,
    Transition,
    TransitionStats,
)
from graphdb.vectors import pack_vector


def _native(value: Any) -> Any:
    """Driver values to plain Python (Neo4j datetimes to aware datetimes, recursively)."""
    if isinstance(value, Neo4jDateTime):
        return value.to_native()
    if isinstance(value, dict):
        return {k: _native(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_native(v) for v in value]
    return value


def _props(model_dump: dict[str, Any]) -> dict[str, Any]:
    """Model fields to node properties: enums as strings, None dropped (Neo4j stores no nulls)."""
    return {k: v for k, v in model_dump.items() if v is not None}


def _technique(row: dict[str, Any]) -> Technique:
    return Technique.model_validate({k: v for k, v in _native(row).items() if v is not None})


def _example(row: dict[str, Any]) -> Example:
    return Example.model_validate({k: v for k, v in _native(row).items() if v is not None})


def _retrieved_example(row: dict[str, Any]) -> Example:
    """A row of `store_queries.retrieved_projection` as an example (no driver datetimes to convert)."""
    props = {k: v for k, v in row.items() if v is not None}
    props.pop("similarity", None)
    seconds, micros = props.pop("created_at_s"), props.pop("created_at_us")
    props["created_at"] = datetime.fromtimestamp(seconds, UTC) + timedelta(microseconds=micros)
    return Example.model_validate(props)


def _retrieved(row: dict[str, Any]) -> ScoredExample:
    """A row of `store_queries.retrieved_projection` with a `similarity` as a scored example."""
    return ScoredExample(example=_retrieved_example(row), similarity=_similarity(row["similarity"]))


def _example_rows(examples: Iterable[Example]) -> list[dict[str, Any]]:
    """Examples as node properties, with their transition key and packed code vector (see graphdb.vectors)."""
    rows = []
    for e in examples:
        row = _enum_values(_props({**e.model_dump(), "transition_key": e.transition_key}))
        if e.code_embedding is not None:
            row["code_vector"] = pack_vector(e.code_embedding)
        rows.append(row)
    return rows


def _transition(row: dict[str, Any], source: str, target: str) -> Transition:
    # `TRANSITION_PUBLIC` holds numbers and the key only: nothing for `_native` to convert.
    stats = TransitionStats.model_validate({k: row[k] for k in q.TRANSITION_STAT_PROPERTIES if k in row})
    return Transition(key=row["key"], source=source, target=target, stats=stats)


def _decision(row: dict[str, Any]) -> RelabelDecision:
    props = _native(row)
    answer = props.pop("judge_answer_json", None)
    props["judge_answer"] = json.loads(answer) if answer is not None else None
    evidence = props.pop("evidence_json", None)
    props["evidence"] = json.loads(evidence) if evidence is not None else None
    return RelabelDecision.model_validate(props)


def _decision_props(decision: RelabelDecision) -> dict[str, Any]:
    # Maps are not property values in Neo4j: the judge's answer and the evidence are stored as JSON.
    props = decision.model_dump(mode="python", exclude={"judge_answer", "evidence"})
    if decision.judge_answer is not None:
        props["judge_answer_json"] = json.dumps(decision.judge_answer, sort_keys=True)
    if decision.evidence is not None:
        props["evidence_json"] = json.dumps(decision.evidence, sort_keys=True, default=str)
    return _props(props)


def _audit(row: dict[str, Any]) -> AuditEntry:
    props = _native(row)
    props["details"] = json.loads(props.pop("details_json", "{}"))
    return AuditEntry.model_validate(props)


def _audit_props(entry: AuditEntry) -> dict[str, Any]:
    props = entry.model_dump(mode="python", exclude={"details"})
    props["details_json"] = json.dumps(entry.details, sort_keys=True, default=str)
    return props


def _enum_values(props: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.value if hasattr(v, "value") else v) for k, v in props.items()}


def _similarity(normalized: float) -> float:
    """Neo4j reports cosine similarity rescaled to [0, 1]; callers see the plain cosine in [-1, 1]."""
    return 2.0 * float(normalized) - 1.0
