"""The workspace's rendering of values (issue 31): Cypher console nodes without their embedding
vectors, audit details as text escaped once, and a failed import naming its problems."""

from __future__ import annotations

import pytest
from jinja2 import Environment
from pydantic import BaseModel, ValidationError

from api.ui.render import as_text, validation_problems, without_vectors


def test_nodes_lose_their_vectors_and_say_so() -> None:
    node = {"_id": "4:x:1", "_labels": ["Technique"], "name": "Tiling", "embedding": [0.1] * 384}
    example = {"_id": "4:x:2", "_labels": ["Example"], "id": "e1", "code_embedding": [0.2] * 384}
    row = {"t": node, "pair": [example, {"embedding": "a map a query built, not a node"}], "n": 3}
    shown = without_vectors(row)
    assert shown["t"] == {
        "_id": "4:x:1",
        "_labels": ["Technique"],
        "name": "Tiling",
        "_left_out": ["embedding"],
    }
    assert shown["pair"][0] == {
        "_id": "4:x:2",
        "_labels": ["Example"],
        "id": "e1",
        "_left_out": ["code_embedding"],
    }
    assert shown["pair"][1] == {"embedding": "a map a query built, not a node"}  # not a node: kept
    assert shown["n"] == 3
    assert "0.1" not in as_text(shown)


def test_audit_details_are_escaped_once_as_html() -> None:
    details = {"reason": "speedup > 2× & <b>bold</b>", "into": "Loop unrolling"}
    env = Environment(autoescape=True)
    env.filters["as_text"] = as_text
    rendered = env.from_string("<td>{{ d|as_text }}</td>").render(d=details)
    assert "\\u003e" not in rendered and "\\u00d7" not in rendered
    assert "speedup &gt; 2× &amp; &lt;b&gt;bold&lt;/b&gt;" in rendered


class _Doc(BaseModel):
    format: str
    items: list[int]


def test_validation_problems_are_named() -> None:
    with pytest.raises(ValidationError) as caught:
        _Doc.model_validate({"items": ["x", 2, "y", "z"]})
    text = validation_problems(caught.value)
    assert text.startswith("format: Field required; items.0: ")
    assert text.endswith("and 1 more")
