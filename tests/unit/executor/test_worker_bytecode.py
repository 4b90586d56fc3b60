"""The executor writes its package's bytecode where a jailed worker reads it: beside the sources, also when
this process writes its own under a ``PYTHONPYCACHEPREFIX`` (``./dev test`` sets one; a jailed worker's
environment does not keep it, and the worker cannot write into the package)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from executor.sandbox import write_worker_bytecode


def _value_seen_by_a_worker(package: Path, module: str) -> str:
    """``module.X`` as an interpreter with no bytecode prefix that writes none (a jailed worker) imports it."""
    code = f"import sys; sys.path.insert(0, {str(package)!r}); import {module} as m; print(m.X)"
    out = subprocess.run([sys.executable, "-I", "-B", "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _rewrite_keeping_stamp(source: Path, text: str) -> None:
    """Replace ``source``'s text with one of the same size and keep its modification time: the import
    system then takes bytecode written for the old text as current, which shows whether it read it."""
    stamp = source.stat()
    assert len(text) == stamp.st_size
    source.write_text(text)
    os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "first.py").write_text("X = 1\n")
    (package / "sub" / "second.py").write_text("X = 3\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    return package


def test_a_worker_loads_the_bytecode_written_under_a_prefix(package: Path) -> None:
    write_worker_bytecode(package)
    _rewrite_keeping_stamp(package / "first.py", "X = 2\n")
    _rewrite_keeping_stamp(package / "sub" / "second.py", "X = 4\n")
    # the bytecode written for the first texts, found beside them: never compiled from the sources
    assert _value_seen_by_a_worker(package, "first") == "1"
    assert _value_seen_by_a_worker(package / "sub", "second") == "3"


def test_bytecode_of_a_changed_source_is_written_again(package: Path) -> None:
    write_worker_bytecode(package)
    source = package / "first.py"
    source.write_text("X = 10\n")
    write_worker_bytecode(package)
    _rewrite_keeping_stamp(source, "X = 20\n")
    assert _value_seen_by_a_worker(package, "first") == "10"
