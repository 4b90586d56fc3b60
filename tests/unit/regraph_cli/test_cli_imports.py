"""The CLI's modules import one way: `regraph_cli.main` assembles the commands, and no command module
imports it back (`regraph mcp` and `regraph up` share the local executor's helpers through
`regraph_cli.local_executor`)."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[3] / "regraph_cli"
ENTRY = frozenset({"main.py", "__main__.py"})  # `python -m regraph_cli` runs main


def imports_of_main(path: Path) -> list[int]:
    """The lines of `path` (function-local imports included) that import `regraph_cli.main`."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        else:
            continue
        if "regraph_cli.main" in named:
            lines.append(node.lineno)
    return lines


def test_no_command_module_imports_the_cli_main() -> None:
    modules = sorted(p for p in CLI.glob("*.py") if p.name not in ENTRY)
    assert len(modules) > 5  # the walk found the package
    assert {p.name: imports_of_main(p) for p in modules if imports_of_main(p)} == {}


def test_the_check_sees_a_function_local_import_of_main(tmp_path: Path) -> None:
    module = tmp_path / "mcp.py"
    module.write_text("def f():\n    from regraph_cli.main import _start\n\nfrom regraph_cli import main\n")
    assert sorted(imports_of_main(module)) == [2, 4]
