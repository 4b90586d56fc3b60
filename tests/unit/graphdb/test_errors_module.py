"""Every public graph error is defined in graphdb/errors.py, so a caller finds them all in one place."""

from __future__ import annotations

import ast
from pathlib import Path

GRAPHDB = Path(__file__).resolve().parents[3] / "graphdb"


def error_classes_outside_errors_module(package: Path) -> list[str]:
    """``file:line Name`` of every public class under `package`, except in errors.py, whose name or
    base names an error or exception (a private one, a retry signal inside a module, is allowed)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "errors.py" and path.parent == package:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            names = [node.name, *(ast.unparse(base) for base in node.bases)]
            if any(n.endswith(("Error", "Exception")) for n in names):
                found.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name}")
    return found


def test_every_graph_error_is_in_the_errors_module() -> None:
    assert (GRAPHDB / "errors.py").is_file()
    assert error_classes_outside_errors_module(GRAPHDB) == []


def test_the_check_sees_an_error_defined_elsewhere(tmp_path: Path) -> None:
    package = tmp_path / "graphdb"
    package.mkdir()
    (package / "errors.py").write_text("class GraphDBError(Exception):\n    pass\n")
    (package / "schema.py").write_text(
        "from graphdb.errors import GraphDBError\n\n\nclass SchemaReadError(GraphDBError):\n    pass\n\n\n"
        "class _Retry(GraphDBError):\n    pass\n"
    )
    assert error_classes_outside_errors_module(package) == ["graphdb/schema.py:4 SchemaReadError"]
