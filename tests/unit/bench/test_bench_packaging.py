"""What the installed package ships: the benchmark's committed results (bench/results/) never, the
service's runtime data (regraph_data/: the task library, the seed graph) always.

The files are worked out from pyproject.toml the way setuptools does it: the packages found by
`find_namespace_packages` with the configured include/exclude, and each package's package-data
patterns globbed (recursively) under that package's folder. A wheel built from this checkout
(`pip wheel --no-deps .`, about 30 s here) listed the same: no bench/results/ file.
"""

from __future__ import annotations

import glob
import tomllib
from pathlib import Path
from typing import Any

from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[3]
RESULTS = "bench/results"


def package_config(pyproject: Path) -> dict[str, Any]:
    """The `[tool.setuptools]` table of `pyproject`."""
    return dict(tomllib.loads(pyproject.read_text())["tool"]["setuptools"])


def shipped_packages(config: dict[str, Any], root: Path) -> list[str]:
    """The packages setuptools finds under `root` (namespace folders included, as in pyproject's default)."""
    find = config["packages"]["find"]
    assert find.get("namespaces", True), "the check below assumes namespace discovery (the default)"
    packages: list[str] = find_namespace_packages(
        where=str(root), include=find.get("include", ["*"]), exclude=find.get("exclude", [])
    )
    return packages


def shipped_files(config: dict[str, Any], root: Path) -> set[str]:
    """Every file the package data patterns select, relative to `root`, and every found package's modules."""
    package_data: dict[str, list[str]] = config.get("package-data", {})
    found: set[str] = set()
    for package in shipped_packages(config, root):
        folder = root / package.replace(".", "/")
        found.update(str(p.relative_to(root)) for p in folder.glob("*.py"))
        for pattern in package_data.get(package, []) + package_data.get("*", []) + package_data.get("", []):
            for match in glob.glob(str(folder / pattern), recursive=True):
                if Path(match).is_file():
                    found.add(str(Path(match).relative_to(root)))
    return found


def results_among(files: set[str]) -> list[str]:
    return sorted(f for f in files if f == RESULTS or f.startswith(RESULTS + "/"))


def test_no_committed_result_is_part_of_the_package() -> None:
    config = package_config(ROOT / "pyproject.toml")
    assert [p for p in shipped_packages(config, ROOT) if p.startswith("bench.results")] == []
    assert results_among(shipped_files(config, ROOT)) == []
    # No MANIFEST.in that could pull them back in through include-package-data.
    manifest = ROOT / "MANIFEST.in"
    assert not manifest.exists() or RESULTS not in manifest.read_text()


def test_bench_results_is_a_folder_of_records_not_a_package() -> None:
    assert (ROOT / RESULTS).is_dir(), "the developers' guide keeps committed results under bench/results/"
    assert sorted((ROOT / RESULTS).rglob("__init__.py")) == []
    assert sorted((ROOT / RESULTS).rglob("*.py")) == []


def test_the_runtime_data_ships_with_the_package() -> None:
    files = shipped_files(package_config(ROOT / "pyproject.toml"), ROOT)
    assert "regraph_data/__init__.py" in files
    assert "regraph_data/seed_graph/seed_graph.json" in files
    tasks = sorted((ROOT / "regraph_data").glob("*tasks/*/task.json"))
    assert len(tasks) > 100
    for task in tasks:
        for part in task.parent.iterdir():
            if part.suffix in (".json", ".cpp", ".cu"):
                assert str(part.relative_to(ROOT)) in files
    assert "bench/split.json" in files and "bench/probes/relabel_data/outside.jsonl" in files


def test_the_check_sees_results_shipped_by_a_recursive_pattern() -> None:
    # The configuration before issue 30: every json under bench/ shipped, results included.
    config = package_config(ROOT / "pyproject.toml")
    config["package-data"] = {**config["package-data"], "bench": ["**/*.json"]}
    assert len(results_among(shipped_files(config, ROOT))) > 10
    # ... and a results folder found as a package (no exclude) is seen too.
    config = package_config(ROOT / "pyproject.toml")
    config["packages"] = {"find": {**config["packages"]["find"], "exclude": []}}
    assert any(p.startswith("bench.results") for p in shipped_packages(config, ROOT))
