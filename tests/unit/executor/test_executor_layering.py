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


# The executor's wire protocol and the formats it carries (tasks, verdicts, run limits, trial policies):
# data models and their validation, nothing that compiles, runs or times a candidate. A caller of the
# service (the search, the API) imports `executor.protocol` and gets only these.
WIRE = frozenset(
    {
        "executor.protocol",
        "executor.taskformat",
        "executor.expr",
        "executor.errors",
        "executor.runlimit",
        "executor.verdict",
        "executor.trialpolicy",
    }
)


def executor_imports_closure(start: str, root: Path) -> set[str]:
    """Every `executor.*` module `start` imports, directly or through another (function-local imports
    included), as dotted names; `root` is the folder that holds the `executor` package."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = root / (module.replace(".", "/") + ".py")
        if not path.is_file():
            path = root / module.replace(".", "/") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "executor":
                names = [f"executor.{alias.name}" for alias in node.names]  # from executor import checking
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            todo.extend(n for n in names if n.split(".")[0] == "executor" and n != "executor")
    return seen


def test_the_wire_protocol_imports_nothing_of_the_runtime() -> None:
    closure = executor_imports_closure("executor.protocol", EXECUTOR.parent)
    assert "executor.verdict" in closure  # the walk followed the imports
    assert closure - WIRE == set()


def test_the_closure_follows_imports_through_other_modules(tmp_path: Path) -> None:
    package = tmp_path / "executor"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "protocol.py").write_text("from executor.verdict import Verdict\n")
    (package / "verdict.py").write_text(
        "def f():\n    from executor import checking\n    import executor.jail\n"
    )
    (package / "jail.py").write_text("")
    (package / "checking.py").write_text("import numpy\n")
    closure = executor_imports_closure("executor.protocol", tmp_path)
    assert closure == {"executor.protocol", "executor.verdict", "executor.checking", "executor.jail"}
