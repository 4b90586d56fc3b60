"""The executor is deployable alone: no module of `executor/` imports another ReGraph package."""

from __future__ import annotations

import ast
from pathlib import Path

EXECUTOR = Path(__file__).resolve().parents[3] / "executor"
# Every top-level package of ReGraph except the executor itself (tests included: nothing of the
# service may need the test support code).
OTHERS = frozenset({"api", "search", "graphdb", "bench", "regraph_cli", "tests"})


def forbidden_imports(package_dir: Path, forbidden: frozenset[str]) -> list[str]:
    """``file:line module`` for every import statement under `package_dir` (function-local ones
    included) whose top-level package is in `forbidden`."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            found.extend(
                f"{path.relative_to(package_dir.parent)}:{node.lineno} {module}"
                for module in modules
                if module.split(".")[0] in forbidden
            )
    return found


def test_the_executor_imports_nothing_of_the_other_packages() -> None:
    assert len(list(EXECUTOR.rglob("*.py"))) > 20  # the walk found the package
    assert forbidden_imports(EXECUTOR, OTHERS) == []


def test_the_check_sees_module_and_function_level_imports(tmp_path: Path) -> None:
    package = tmp_path / "executor"
    package.mkdir()
    (package / "a.py").write_text("import numpy\nfrom executor.errors import ExecutorError\n")
    (package / "b.py").write_text("def f():\n    import search.engine\n    from api import app\n")
    assert forbidden_imports(package, OTHERS) == ["executor/b.py:2 search.engine", "executor/b.py:3 api"]
