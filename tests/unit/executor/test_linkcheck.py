"""A function candidate's library may not import the Python runtime it is loaded into
(:mod:`executor.linkcheck`): read from the library's dynamic symbol table, whatever the source hid."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.linkcheck import LibraryFormatError, python_imports, undefined_symbols
from tests.support.hostcode import build_host_candidates

# The name is pasted together by the preprocessor, so the source never spells it out.
PASTED = (
    "#define CAT(a, b) a##b\n"
    'extern "C" int CAT(P, yRun_SimpleString)(const char*);\n'
    'extern "C" void f(int n, float* y) { if (n < 0) CAT(P, yRun_SimpleString)("x = 1"); y[0] = n; }\n'
)
HONEST = 'extern "C" void f(int n, float* y) { for (int i = 0; i < n; ++i) y[i] = i; }\n'


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(tmp_path_factory.mktemp("linkcheck"), {"pasted": PASTED, "honest": HONEST})


def test_a_pasted_python_api_name_is_found_in_the_library(libraries: dict[str, str]) -> None:
    assert "PyRun_SimpleString" not in PASTED
    assert python_imports(libraries["pasted"]) == ["PyRun_SimpleString"]
    assert python_imports(libraries["honest"]) == []


def test_defined_symbols_are_not_imports(libraries: dict[str, str]) -> None:
    names = undefined_symbols(libraries["honest"])
    assert "f" not in names  # its own entry point is defined there
    assert "f" not in undefined_symbols(libraries["pasted"]) and "PyRun_SimpleString" in undefined_symbols(
        libraries["pasted"]
    )


def test_a_file_that_is_not_a_library_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "not.so"
    path.write_bytes(b"#!/bin/sh\necho not a library\n")
    with pytest.raises(LibraryFormatError, match="not a 64-bit"):
        undefined_symbols(path)
