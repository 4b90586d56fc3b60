"""A function candidate's library may not import the Python runtime it is loaded into
(:mod:`executor.linkcheck`): read from the library's dynamic symbol table, whatever the source hid."""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.linkcheck import (
    LibraryFormatError,
    dynamic_symbols,
    process_symbols,
    python_symbols,
    undefined_symbols,
)
from tests.support.hostcode import build_host_candidates

# The name is pasted together by the preprocessor, so the source never spells it out.
PASTED = (
    "#define CAT(a, b) a##b\n"
    'extern "C" int CAT(P, yRun_SimpleString)(const char*);\n'
    'extern "C" void f(int n, float* y) { if (n < 0) CAT(P, yRun_SimpleString)("x = 1"); y[0] = n; }\n'
)
HONEST = 'extern "C" void f(int n, float* y) { for (int i = 0; i < n; ++i) y[i] = i; }\n'
# Defines the name instead of importing it: loaded into the interpreter's process, its calls are bound
# to the interpreter's function of that name all the same (review21c ran Python this way).
DEFINED = (
    "#define CAT(a, b) a##b\n"
    'extern "C" int CAT(P, yRun_SimpleString)(const char*) { return 0; }\n'
    'extern "C" void f(int n, float* y) { if (n < 0) CAT(P, yRun_SimpleString)("x = 1"); y[0] = n; }\n'
)
# 70,000 sections: the ELF header's section count overflows to 0 and the real count moves into the
# first section header (review21c: a parser that read the header's count saw no symbol table at all).
MANY_SECTIONS = (
    "#define CAT(a, b) a##b\n"
    '#define S1(n) __asm__(".section .s" #n ",\\"a\\"\\n.byte 0\\n.text");\n'
    'extern "C" int CAT(P, yRun_SimpleString)(const char*);\n'
    'extern "C" void f(int n, float* y) { if (n < 0) CAT(P, yRun_SimpleString)("x = 1"); y[0] = n; }\n'
)

# A shell through pointers to popen and system (review 22b), and glibc's newer _Fork and execveat,
# declared by the candidate itself (review 22c): no call the static rules see.
SPAWNING = (
    "#include <cstdio>\n#include <cstdlib>\n"
    'extern "C" int _Fork(void);\n'
    'extern "C" int execveat(int, const char*, char* const*, char* const*, int);\n'
    'extern "C" void f(int n, float* y) {\n'
    "    FILE* (*run)(const char*, const char*) = popen; int (*shell)(const char*) = system;\n"
    "    int (*split)(void) = _Fork; int (*become)(int, const char*, char* const*, char* const*, int) = execveat;\n"
    '    if (n < 0) { run("id", "r"); shell("id"); if (split() == 0) become(0, "/bin/sh", 0, 0, 0); }\n'
    "    y[0] = n;\n}\n"
)


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    sections = "".join(f"S1({i})\n" for i in range(70000))
    return build_host_candidates(
        tmp_path_factory.mktemp("linkcheck"),
        {
            "pasted": PASTED,
            "honest": HONEST,
            "defined": DEFINED,
            "many_sections": MANY_SECTIONS + sections,
            "spawning": SPAWNING,
        },
    )


def test_a_pasted_python_api_name_is_found_in_the_library(libraries: dict[str, str]) -> None:
    assert "PyRun_SimpleString" not in PASTED
    assert python_symbols(libraries["pasted"]) == ["PyRun_SimpleString"]
    assert python_symbols(libraries["honest"]) == []


def test_a_python_api_name_the_library_defines_is_found_too(libraries: dict[str, str]) -> None:
    assert ("PyRun_SimpleString", True) in dynamic_symbols(libraries["defined"])
    assert "PyRun_SimpleString" not in undefined_symbols(libraries["defined"])
    assert python_symbols(libraries["defined"]) == ["PyRun_SimpleString"]


def test_more_sections_than_the_header_can_count_still_show_the_import(libraries: dict[str, str]) -> None:
    elf = Path(libraries["many_sections"]).read_bytes()
    assert int.from_bytes(elf[0x3C:0x3E], "little") == 0  # the count overflowed into the first header
    assert python_symbols(libraries["many_sections"]) == ["PyRun_SimpleString"]


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


def test_a_library_whose_symbol_table_cannot_be_found_is_not_taken_for_an_empty_one(
    libraries: dict[str, str], tmp_path: Path
) -> None:
    """Failing closed: with the section header table cut off, or no dynamic symbol table, it raises."""
    elf = bytearray(Path(libraries["pasted"]).read_bytes())
    shoff = int.from_bytes(elf[0x28:0x30], "little")
    cut = tmp_path / "cut.so"
    cut.write_bytes(bytes(elf[: shoff + 64]))
    with pytest.raises(LibraryFormatError):
        python_symbols(cut)
    shentsize, shnum = int.from_bytes(elf[0x3A:0x3C], "little"), int.from_bytes(elf[0x3C:0x3E], "little")
    for i in range(shnum):  # every SHT_DYNSYM (11) turned into SHT_PROGBITS (1)
        at = shoff + i * shentsize + 4
        if int.from_bytes(elf[at : at + 4], "little") == 11:
            elf[at : at + 4] = (1).to_bytes(4, "little")
    hidden = tmp_path / "hidden.so"
    hidden.write_bytes(bytes(elf))
    with pytest.raises(LibraryFormatError, match="no dynamic symbol table"):
        python_symbols(hidden)


def test_a_library_that_imports_what_starts_a_process_is_found(libraries: dict[str, str]) -> None:
    assert sorted(process_symbols(libraries["spawning"])) == ["_Fork", "execveat", "popen", "system"]
    assert process_symbols(libraries["honest"]) == [] and process_symbols(libraries["pasted"]) == []
