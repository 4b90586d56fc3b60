"""The packages' one-way flow: api -> search -> graphdb / executor, and the entry points on top.

Each rule lists what a package may not import; the checks read every import statement (function-local
ones included) with `ast`, so a forbidden import fails here before it becomes a habit. The executor's
own rule (it imports nothing of ReGraph) is in tests/unit/executor.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import graphdb.models
import search.protocols

ROOT = Path(__file__).resolve().parents[2]

# search/ by folder: `search/relabel/` (relabeling and graph construction) may touch the graph; the
# rest of search/ is the MCGS core (the engine, the methods, the policy, the models, the use-case),
# which never imports `search.relabel` and knows the graph only through the `KnowledgeSource` port,
# whose one implementation over the store is `GraphKnowledge` (search/retrieval.py, read by MCGS).
RELABEL = "search/relabel"
GRAPH_KNOWLEDGE = "search/retrieval.py"
# What the search core may use of the executor: its wire protocol, its client and the client's errors.
EXECUTOR_PUBLIC = frozenset({"executor.protocol", "executor.client", "executor.errors"})
# What the entry points (CLI, benchmarks) may use of the API: its settings, start-up, app factory,
# logging and wire models (and the MCP server's stdio start-up and settings, `regraph mcp`, and how a command finds
# the stack already running on its data directory, `api.discovery`; `api.startup`, where the app's
# background start-up is, which `regraph up` waits for); never a service's or a router's internals.
# api.connections: the uvicorn configuration that serves the app with the HTTP edge's limits
# (`regraph up`).
API_FOR_ENTRY_POINTS = frozenset(
    {
        "api.app",
        "api.connections",
        "api.edge",
        "api.logs",
        "api.settings",
        "api.state",
        "api.startup",
        "api.mcp.stdio",
        "api.mcp.settings",
        "api.discovery",
    }
)


@dataclass(frozen=True)
class Import:
    """One imported module, and where."""

    path: Path
    line: int
    module: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} {self.module}"


def imports_of(paths: list[Path]) -> list[Import]:
    """Every absolute import in the given files."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append(Import(path, node.lineno, node.module))
            elif isinstance(node, ast.Import):
                found.extend(Import(path, node.lineno, alias.name) for alias in node.names)
    return found


def files(package: str, *, except_: frozenset[str] = frozenset()) -> list[Path]:
    """The package's modules (at least one: a renamed package must not empty a rule)."""
    found = sorted(p for p in (ROOT / package).rglob("*.py") if p.name not in except_)
    assert found, f"no modules under {package}/"
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def is_api_wire_model(module: str) -> bool:
    return module.startswith("api.") and module.endswith((".models", ".protocol"))


def test_graphdb_imports_none_of_the_packages_above_it() -> None:
    above = {"search", "api", "executor", "bench", "regraph_cli"}
    assert [str(i) for i in imports_of(files("graphdb")) if top(i.module) in above] == []


def test_search_imports_neither_the_api_nor_the_entry_points() -> None:
    above = {"api", "bench", "regraph_cli"}
    assert [str(i) for i in imports_of(files("search")) if top(i.module) in above] == []


def search_core() -> list[Path]:
    """search/ outside its relabel folder (at least run.py and mcgs.py: a move must not empty it)."""
    core = [p for p in files("search") if not p.is_relative_to(ROOT / RELABEL)]
    assert any(p.name == "run.py" for p in core) and any(p.name == "mcgs.py" for p in core)
    return core


def test_the_search_core_knows_no_graph_database_and_only_the_executors_contract() -> None:
    wrong = [
        str(i)
        for i in imports_of(search_core())
        if (top(i.module) == "graphdb" and i.path != ROOT / GRAPH_KNOWLEDGE)
        or (top(i.module) == "executor" and i.module not in EXECUTOR_PUBLIC)
    ]
    assert wrong == []


def test_the_search_core_imports_nothing_of_the_relabel_folder() -> None:
    assert files(RELABEL)
    relabel = RELABEL.replace("/", ".")
    wrong = [
        str(i) for i in imports_of(search_core()) if i.module == relabel or i.module.startswith(relabel + ".")
    ]
    assert wrong == []


def test_the_api_imports_no_entry_point() -> None:
    assert [str(i) for i in imports_of(files("api")) if top(i.module) in {"bench", "regraph_cli"}] == []


def test_entry_points_use_the_api_only_through_its_settings_start_up_and_wire_models() -> None:
    entry_points = files("regraph_cli") + files("bench")
    wrong = [
        str(i)
        for i in imports_of(entry_points)
        if top(i.module) == "api"
        and i.module not in API_FOR_ENTRY_POINTS
        and not is_api_wire_model(i.module)
        and i.module != "api"
    ]
    assert wrong == []


def test_the_search_core_names_the_graphs_initial_node_as_the_graph_does() -> None:
    assert search.protocols.INITIAL_TECHNIQUE == graphdb.models.INITIAL_TECHNIQUE


@pytest.mark.parametrize(
    ("package", "module", "source", "rule"),
    [
        ("search", "mcgs.py", "from graphdb.models import Example\n", "core"),
        ("search", "run.py", "def f():\n    from executor.worker import messages\n", "core"),
        ("search", "retrieval.py", "import api.app\n", "search"),
        ("search", "mcgs.py", "from search.relabel.taxonomy import Taxonomy\n", "relabel"),
        ("search", "run.py", "def f():\n    import search.relabel\n", "relabel"),
        ("search", "engine.py", "from graphdb.store import GraphStore\n", "core"),
        ("api", "deps.py", "from bench.runner import CudaEvalRunner\n", "api"),
        ("regraph_cli", "optimize.py", "from api.optimize.service import resolve_task\n", "entry"),
    ],
)
def test_each_rule_fails_when_a_forbidden_import_is_added(
    package: str, module: str, source: str, rule: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rules above, run on a scratch tree with one forbidden import added.
    for name in ("api", "search", "search/relabel", "graphdb", "bench", "regraph_cli"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    # The relabel folder may touch the graph (passes every rule as it is).
    (tmp_path / "search" / "relabel" / "construction.py").write_text("from graphdb.store import GraphStore\n")
    (tmp_path / "search" / "retrieval.py").write_text("from graphdb.store import GraphStore\n")
    (tmp_path / "search" / "run.py").write_text("from executor.protocol import Verdict\n")
    (tmp_path / "search" / "mcgs.py").write_text("from search.engine import SearchConfig\n")
    target = tmp_path / package / module
    target.write_text(source)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    checks = {
        "core": test_the_search_core_knows_no_graph_database_and_only_the_executors_contract,
        "search": test_search_imports_neither_the_api_nor_the_entry_points,
        "relabel": test_the_search_core_imports_nothing_of_the_relabel_folder,
        "api": test_the_api_imports_no_entry_point,
        "entry": test_entry_points_use_the_api_only_through_its_settings_start_up_and_wire_models,
    }
    with pytest.raises(AssertionError):
        checks[rule]()
    target.write_text("")
    checks[rule]()  # the same tree without the import passes


# Classes that share a name on purpose: each service owns its own error envelope (the executor is
# deployable alone and must not import the API's, nor the API the executor's internals).
SHARED_CLASS_NAMES = frozenset({"ErrorBody", "ErrorEnvelope"})
PROJECT_PACKAGES = ("api", "search", "graphdb", "executor", "bench", "regraph_cli")


def _class_names(root: Path) -> dict[str, list[str]]:
    """Every top-level class of the project's packages: name -> the files defining it."""
    found: dict[str, list[str]] = {}
    for package in PROJECT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append(str(path.relative_to(root)))
    return found


def test_no_two_classes_of_the_project_share_a_name() -> None:
    """A class name means one thing across the packages (`Candidate` the search's, `Verdict` the
    executor's, ...): a second class of the same name elsewhere is renamed, not imported under an
    alias, so a reader never has to ask which one a name is."""
    shared = {
        name: files
        for name, files in _class_names(ROOT).items()
        if len(files) > 1 and name not in SHARED_CLASS_NAMES
    }
    assert not shared, shared


def test_the_class_name_check_sees_a_second_class_of_a_name(tmp_path: Path) -> None:
    for package, source in (
        ("search", "class Candidate:\n    pass\n"),
        ("graphdb", "class Candidate: ...\n"),
    ):
        (tmp_path / package).mkdir()
        (tmp_path / package / "models.py").write_text(source)
    assert sorted(_class_names(tmp_path)["Candidate"]) == ["graphdb/models.py", "search/models.py"]


# -- the API's faces ------------------------------------------------------------------------------------
# Each feature (api/<feature>/) has up to three faces: its /v1 routes (http.py), its /ui pages (ui.py) and
# its MCP tools (mcp.py); the /ui shell (api/ui/) and the MCP server (api/mcp/) belong to their face. What
# faces share (wire models, services, dependencies, the error root) lives in modules that are no face,
# and `api/app.py` only assembles them.
FACE_MODULES = frozenset({"http", "mcp", "ui"})
FACE_SHELLS = frozenset({"mcp", "ui"})


def face_of(module: str) -> str | None:
    """Which face a module of api/ belongs to, or None for a module that no face owns."""
    parts = module.split(".")
    if parts[0] != "api" or len(parts) < 2:
        return None
    if parts[1] in FACE_SHELLS:
        return parts[1]
    if len(parts) == 3 and parts[2] in FACE_MODULES:
        return parts[2]
    return None


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def face_imports(paths: list[Path]) -> list[tuple[Path, str]]:
    """Every api module each file imports, `from api.x import mcp` read as `api.x.mcp`."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((path, node.module))
                found.extend((path, f"{node.module}.{alias.name}") for alias in node.names)
            elif isinstance(node, ast.Import):
                found.extend((path, alias.name) for alias in node.names)
    return found


def test_no_face_of_the_api_imports_another_face() -> None:
    modules = files("api")
    faces = {face_of(_module_name(p).removesuffix(".__init__")) for p in modules}
    assert {"http", "mcp", "ui"} <= faces  # the rule has something to check on every face
    wrong = []
    for path, imported in face_imports(modules):
        own, other = face_of(_module_name(path).removesuffix(".__init__")), face_of(imported)
        if own is not None and other is not None and own != other:
            wrong.append(f"{path.relative_to(ROOT)}: {own} face imports {imported} ({other} face)")
    assert wrong == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("api/techniques/mcp.py", "from api.techniques.http import router\n"),
        ("api/examples/http.py", "from api.examples import mcp\n"),
        ("api/mcp/server.py", "def f():\n    import api.ui.router\n"),
        ("api/ui/pages.py", "from api.cypher.http import cypher\n"),
    ],
)
def test_the_face_rule_fails_when_one_face_imports_another(
    module: str, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for face_module in ("api/cypher/http.py", "api/examples/mcp.py", "api/ui/__init__.py"):
        (tmp_path / face_module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / face_module).write_text("from api.errors import ServiceError\n")
    target = tmp_path / module
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    with pytest.raises(AssertionError):
        test_no_face_of_the_api_imports_another_face()
    target.write_text("")
    test_no_face_of_the_api_imports_another_face()  # the same tree without the import passes
