"""Each feature's service asks for the narrow store protocol of its aggregate, never the whole store.

`api/<feature>/service.py` may import from `graphdb.store` exactly its own protocol (and its `__init__`
takes the store as that protocol); only `api/graph/service.py`, which composes the services for the
faces, takes the whole `GraphStore`. The faces in turn take one feature's service each: the composition
itself (`GraphServices`) is named only where the faces' dependencies are built.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import graphdb.store

ROOT = Path(__file__).resolve().parents[3]
API = ROOT / "api"

# The store protocol (graphdb.store.interface) each feature's service asks for.
SERVICE_STORES = {
    "techniques": "TechniqueStore",
    "examples": "ExampleStore",
    "retrieve": "RetrievalStore",
    "audit": "AuditStore",
    "keys": "KeyStore",
    "transfer": "TransferStore",
    "relabel": "RelabelStore",
}
COMPOSITION = "graph"  # api/graph/service.py: GraphServices, every service over one GraphStore
# Where the composition may be named: the FastAPI dependencies (one alias per feature service, for the
# /v1 routes and the /ui pages) and the MCP tools' context (`ReasoningGraphService.graph.<feature>`).
COMPOSITION_USERS = frozenset({"api/deps.py", "api/mcp/service.py"})
# Services that build a store of their own rather than take one: optimize opens one per job for the
# search's adapters (`GraphKnowledge` reads it as a RetrievalStore, `GraphImprovements` as an IngestStore).
STORE_BUILDERS = {"optimize": "Neo4jGraphStore"}
GRAPH_STORES = frozenset(graphdb.store.__all__)  # the protocols and implementations of graphdb.store
FACES = frozenset({"mcp", "ui", "routers"})  # they assemble the features; their stores are the app's


def store_imports(source: str) -> set[str]:
    """What a module imports of the store package: names from `graphdb.store[.*]`, and the module
    itself (as "graphdb.store...") when it is imported whole."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("graphdb.store"):
            if node.module != "graphdb.store" and not node.module.startswith("graphdb.store."):
                continue  # graphdb.store_queries and the like
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                a.name for a in node.names if a.name == "graphdb.store" or a.name.startswith("graphdb.store.")
            )
    return found


def store_parameters(source: str) -> set[str]:
    """The annotations of every `store` parameter of the module's functions (as written)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                if arg.arg == "store" and arg.annotation is not None:
                    found.add(ast.unparse(arg.annotation))
    return found


def feature_services() -> dict[str, Path]:
    return {
        p.parent.name: p
        for p in sorted(API.glob("*/service.py"))
        if p.parent.name != COMPOSITION and p.parent.name not in FACES
    }


def test_every_feature_service_is_listed_and_asks_for_its_own_store_only() -> None:
    services = feature_services()
    assert set(SERVICE_STORES) <= set(services), "a listed feature has no service.py"
    for feature, path in services.items():
        source = path.read_text()
        imported = store_imports(source)
        if not imported:
            continue  # a service without the graph store
        if feature in STORE_BUILDERS:
            assert imported == {STORE_BUILDERS[feature]}, (
                f"{path.relative_to(ROOT)} imports {sorted(imported)}"
            )
            taken = store_parameters(source) & GRAPH_STORES
            assert not taken, f"{path.relative_to(ROOT)} takes a graph store: list it"
            continue
        assert feature in SERVICE_STORES, f"{path.relative_to(ROOT)} uses the store: list its protocol here"
        expected = SERVICE_STORES[feature]
        assert imported == {expected}, f"{path.relative_to(ROOT)} imports {sorted(imported)} of graphdb.store"
        assert store_parameters(source) == {expected}, f"{path.relative_to(ROOT)} takes another store"


def test_only_the_composition_takes_the_whole_store() -> None:
    source = (API / COMPOSITION / "service.py").read_text()
    assert store_imports(source) == {"GraphStore"}
    assert store_parameters(source) == {"GraphStore"}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from graphdb.store import GraphStore\n", {"GraphStore"}),
        ("from graphdb.store.interface import KeyStore, GraphStore\n", {"KeyStore", "GraphStore"}),
        ("def f():\n    import graphdb.store.neo4j\n", {"graphdb.store.neo4j"}),
        ("from graphdb.store_queries import X\nfrom graphdb import models\n", set()),
    ],
)
def test_the_check_sees_every_way_of_importing_the_store(source: str, found: set[str]) -> None:
    assert store_imports(source) == found


def test_the_check_sees_a_store_parameter_of_another_protocol() -> None:
    source = "class S:\n    def __init__(self, store: GraphStore, *, x: int) -> None: ...\n"
    assert store_parameters(source) == {"GraphStore"}


def composition_users(root: Path) -> set[str]:
    """The modules of api/ (but the composition's own) that import `GraphServices` (or its dependency)."""
    found: set[str] = set()
    for path in sorted((root / "api").rglob("*.py")):
        if path.parent.name == COMPOSITION and path.parent.parent == root / "api":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(
                "graphservices" in a.name.lower().replace("_", "") for a in node.names
            ):
                found.add(str(path.relative_to(root)))
    return found


def test_no_route_page_or_tool_takes_the_whole_composition() -> None:
    assert composition_users(ROOT) == COMPOSITION_USERS


def test_the_composition_check_sees_a_page_that_takes_every_service(tmp_path: Path) -> None:
    for module in COMPOSITION_USERS:
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("from api.graph.service import GraphServices\n")
    (tmp_path / "api" / "techniques").mkdir()
    (tmp_path / "api" / "techniques" / "ui.py").write_text("from api.deps import get_graph_services\n")
    (tmp_path / "api" / COMPOSITION).mkdir()
    (tmp_path / "api" / COMPOSITION / "service.py").write_text("class GraphServices: ...\n")
    assert composition_users(tmp_path) == {*COMPOSITION_USERS, "api/techniques/ui.py"}
