"""Fixtures of the benchmark tests.

``bench/tools/check_tasks.py`` is loaded from its file rather than imported as ``bench.tools``: with
pytest's default import mode this test package itself is importable as ``bench`` (``tests/unit`` has
no ``__init__.py``), which would shadow the repository's ``bench`` package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
_MODULE_NAME = "regraph_bench_check_tasks"


def load_check_tasks() -> ModuleType:
    """The task checker module, loaded once from ``bench/tools/check_tasks.py``."""
    if _MODULE_NAME in sys.modules:
        return sys.modules[_MODULE_NAME]
    spec = importlib.util.spec_from_file_location(
        _MODULE_NAME, REPO_ROOT / "bench" / "tools" / "check_tasks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE_NAME] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def check_tasks() -> ModuleType:
    """The task checker module."""
    return load_check_tasks()
