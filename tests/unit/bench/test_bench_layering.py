"""The benchmark's borders: `bench` never imports the CLI (the CLI drives the benchmark, not the other
way), the product never imports its probes, the runtime data package imports nothing of ours, and the
API names no path under bench/ (its task library and seed graph are in regraph_data/, named by its
settings). Each rule is also run once on a scratch tree that breaks it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_layering import Import, imports_of, top

ROOT = Path(__file__).resolve().parents[3]
PROJECT_PACKAGES = frozenset({"api", "search", "graphdb", "executor", "bench", "regraph_cli", "regraph_data"})
# A path under bench/ written as text ("bench/tasks") or as a path part (ROOT / "bench" / ...).
BENCH_PATH = re.compile(r"""\bbench/|["']bench["']""")


def named(imports: list[Import]) -> list[str]:
    return [f"{i.path}:{i.line} {i.module}" for i in imports]


def modules(root: Path, package: str) -> list[Path]:
    found = sorted((root / package).rglob("*.py"))
    assert found, f"no modules under {package}/"
    return found


def bench_imports_of_the_cli(root: Path) -> list[str]:
    return named([i for i in imports_of(modules(root, "bench")) if top(i.module) == "regraph_cli"])


# Probes: bench/probes/, and the device scripts of bench/device/ (probes run on a lent GPU).
PROBE_DIRS = frozenset({"probes", "device"})


def product_imports_of_probes(root: Path) -> list[str]:
    product = [p for p in modules(root, "bench") if not PROBE_DIRS & set(p.relative_to(root / "bench").parts)]
    return named([i for i in imports_of(product) if i.module.split(".")[:2] == ["bench", "probes"]])


def data_imports_of_the_project(root: Path) -> list[str]:
    return named([i for i in imports_of(modules(root, "regraph_data")) if top(i.module) in PROJECT_PACKAGES])


def bench_paths_named_by_the_api(root: Path) -> list[str]:
    found = []
    for path in sorted((root / "api").rglob("*")):
        if path.is_file() and path.suffix in (".py", ".html", ".js", ".css", ".toml", ".json"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if BENCH_PATH.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


RULES = {
    "cli": bench_imports_of_the_cli,
    "probes": product_imports_of_probes,
    "data": data_imports_of_the_project,
    "paths": bench_paths_named_by_the_api,
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_rule_holds(rule: str) -> None:
    assert RULES[rule](ROOT) == []


@pytest.mark.parametrize(
    ("rule", "file", "source"),
    [
        ("cli", "bench/runner.py", "from regraph_cli.bench import bench_app\n"),
        ("cli", "bench/probes/ui_pages.py", "def f():\n    import regraph_cli.main\n"),
        ("probes", "bench/runner.py", "from bench.probes.throughput import summarize\n"),
        ("probes", "bench/cudaeval.py", "from bench.probes.busy import busy_interpreter\n"),
        ("data", "regraph_data/__init__.py", "from bench.split import DEFAULT_SPLIT_PATH\n"),
        ("paths", "api/settings.py", 'TASKS = ROOT / "bench" / "tasks"\n'),
        ("paths", "api/mcp/server.py", 'HELP = "a task id (bench/tasks)"\n'),
        ("paths", "api/ui/templates/page.html", "<p>see bench/seed_graph/README.md</p>\n"),
    ],
)
def test_each_rule_fails_when_it_is_broken(rule: str, file: str, source: str, tmp_path: Path) -> None:
    for package in ("api", "bench", "bench/probes", "regraph_data"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text('"""The benchmark."""\n')
    target = tmp_path / file
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source)
    assert RULES[rule](tmp_path) != []
    target.write_text("")
    assert RULES[rule](tmp_path) == []  # the same tree without the breach passes
