"""The /ui face by feature: each feature's pages (``api/<feature>/ui.py``) stand on the shell's visitor
and their own feature, never on another feature's pages nor on another face (a feature's ``http.py`` or ``mcp.py``,
``api/mcp``); the shell mounts every one of them; no module of the face grows past the sizes issue 30
set (500 lines a file, 120 a function)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from fastapi.routing import APIRoute

from api.ui import shell
from tests.unit.test_layering import imports_of

ROOT = Path(__file__).resolve().parents[3]
OTHER_FACES = ("api.mcp",)
FACE_MODULES = (".http", ".mcp")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 120


def feature_pages(root: Path) -> list[Path]:
    """Every feature's /ui module (at least one: a rename must not empty the rule)."""
    found = sorted((root / "api").glob("*/ui.py"))
    assert found, "no api/<feature>/ui.py"
    return found


def crossings(root: Path) -> list[str]:
    """Imports of a feature's ui.py that reach another feature's ui.py or another face."""
    wrong = []
    for path in feature_pages(root):
        feature = path.parent.name
        for found in imports_of([path]):
            module = found.module
            other_pages = (
                module.endswith(".ui") and module.startswith("api.") and module != f"api.{feature}.ui"
            )
            other_face = any(module == face or module.startswith(face + ".") for face in OTHER_FACES) or (
                module.startswith("api.") and module.endswith(FACE_MODULES)
            )
            if other_pages or other_face:
                wrong.append(f"{path.relative_to(root)}:{found.line} {module}")
    return wrong


def test_a_features_pages_import_no_other_features_pages_and_no_other_face() -> None:
    assert crossings(ROOT) == []


@pytest.mark.parametrize(
    "source",
    [
        "from api.techniques.ui import router\n",
        "def f():\n    import api.audit.ui\n",
        "from api.cypher.http import cypher\n",
        "from api.examples.mcp import register\n",
        "from api.mcp.service import ReasoningGraphService\n",
    ],
)
def test_the_rule_sees_a_forbidden_import(source: str, tmp_path: Path) -> None:
    for feature in ("examples", "techniques"):
        (tmp_path / "api" / feature).mkdir(parents=True)
        (tmp_path / "api" / feature / "ui.py").write_text("from api.ui.visitor import VisitDep\n")
    assert crossings(tmp_path) == []
    (tmp_path / "api" / "examples" / "ui.py").write_text(source)
    assert len(crossings(tmp_path)) == 1


def test_the_shell_mounts_every_features_pages_and_their_routes_are_module_level_functions() -> None:
    mounted = [id(router) for router in shell.FEATURES]
    for path in feature_pages(ROOT):
        module = importlib.import_module(f"api.{path.parent.name}.ui")
        assert id(module.router) in mounted, f"{path.relative_to(ROOT)} is not mounted by api/ui/shell.py"
        routes = [r for r in module.router.routes if isinstance(r, APIRoute)]
        assert routes, f"{path.relative_to(ROOT)} serves no page"
        for route in routes:
            assert route.path.startswith("/ui/"), route.path
            # A route defined inside a builder is invisible to tools (dead-code scans call it unused).
            assert "<locals>" not in route.endpoint.__qualname__, route.endpoint.__qualname__
    assert len(set(mounted)) == len(feature_pages(ROOT))


def test_no_module_of_the_ui_face_is_over_its_size() -> None:
    modules = sorted((ROOT / "api" / "ui").glob("*.py")) + feature_pages(ROOT)
    too_long = []
    for path in modules:
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            too_long.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []
