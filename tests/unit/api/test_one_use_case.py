"""The API decides what the search decides through the search's own code, never inline (issue 30): what an
evaluation verifies (`search.run.choose_verification`) and what the graph offers next
(`search.retrieval.GraphKnowledge`, the knowledge source MCGS asks)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _api_modules() -> list[Path]:
    return sorted((ROOT / "api").rglob("*.py"))


def _attributes_read(path: Path) -> set[str]:
    return {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}


def _names_called(path: Path) -> set[str]:
    called = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            called.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))
    return called


def test_no_api_module_reads_the_executors_device_to_choose_verification() -> None:
    readers = [
        str(p.relative_to(ROOT)) for p in _api_modules() if "runtime_checks_available" in _attributes_read(p)
    ]
    assert readers == []


def test_the_evaluation_tools_choose_verification_as_a_run_does() -> None:
    assert "choose_verification" in _names_called(ROOT / "api" / "evaluations" / "mcp.py")


def test_next_techniques_asks_the_search_knowledge_source() -> None:
    module = ROOT / "api" / "retrieve" / "mcp.py"
    assert "GraphKnowledge" in _names_called(module)
    assert "retrieve" not in _attributes_read(module)  # not the graph service's own retrieval
