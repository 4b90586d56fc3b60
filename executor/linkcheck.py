"""What a function candidate's library asks the dynamic linker for: refused when it reaches into Python.

A function task's build is a shared library that the worker loads into its own process (a Python
interpreter, :mod:`executor.worker`) and calls through ctypes, and the checks of its outputs and times
run in that same process. A library that imports the interpreter's C API (``PyRun_SimpleString``,
``PyGILState_Ensure``, any ``Py*``/``_Py*`` name) can run Python there and rewrite the checks (session
21's review showed one replacing the spot check and passing with a skimmed median). The static rules
refuse such names in the source, but a macro can paste a name together; the linked library cannot hide
what it imports or exports. Its dynamic symbols are read here from its ELF ``.dynsym`` sections, failing
closed (a table that cannot be found or read whole refuses the library).

What this does not stop: native code that finds the interpreter without importing it by name (through
``dlsym``, which CUDA's static runtime imports anyway and the static rules refuse only when written
out; or by walking the process's memory). The complete answer is a candidate process that holds no
checker; this check closes the route that takes one line.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from executor.elf import ElfFormatError, sections

_SHT_DYNSYM = 11
_SHT_STRTAB = 3
_SYMBOL_SIZE = 24  # Elf64_Sym
# The CPython C API's names (public and private), as the linker sees them.
PYTHON_SYMBOL = re.compile(r"^_*Py[A-Z_]")
# What starts a process. The static rules refuse these names when called, but a pointer to them or a
# pasted name passes (review 22b ran a shell in the jailed worker through ``popen`` taken as a pointer);
# CUDA's static runtime imports none of them (checked on nvcc 13.2 here: 165 imports, among them dlsym,
# mprotect, syscall and socket, which therefore cannot be refused this way).
PROCESS_SYMBOL = re.compile(
    r"^(system|popen|fork|_Fork|vfork|clone|clone3|__clone|execl|execlp|execle|execv|execvp|execvpe|execve"
    r"|execveat|fexecve|posix_spawnp?|pidfd_spawnp?|daemon)$"
)


class LibraryFormatError(ValueError):
    """The file is not a 64-bit little-endian ELF shared library whose symbol tables can be read."""


def dynamic_symbols(path: str | Path) -> list[tuple[str, bool]]:
    """Every named entry of a shared library's dynamic symbol tables: (name without version suffix,
    whether the library defines it). Fails closed: a file whose tables cannot be found or read whole
    raises :class:`LibraryFormatError`, so that nothing is taken for an empty table."""
    elf = Path(path).read_bytes()
    try:
        headers, _ = sections(elf)
        symbols: list[tuple[str, bool]] = []
        tables = [h for h in headers if h.kind == _SHT_DYNSYM]
        if not tables:
            raise ElfFormatError("no dynamic symbol table")
        for table in tables:
            if table.link >= len(headers) or headers[table.link].kind != _SHT_STRTAB:
                raise ElfFormatError("a dynamic symbol table without its string table")
            entries, strings = table.data(elf), headers[table.link].data(elf)
            for at in range(0, len(entries) - _SYMBOL_SIZE + 1, _SYMBOL_SIZE):
                name_at, _info, _other, section = struct.unpack_from("<IBBH", entries, at)
                if name_at == 0:
                    continue
                if name_at >= len(strings):
                    raise ElfFormatError("a symbol name out of its string table")
                end = strings.find(b"\0", name_at)
                name = strings[name_at : end if end >= 0 else None].decode("utf-8", "replace")
                symbols.append((name, section != 0))
    except ElfFormatError as e:
        raise LibraryFormatError(f"{path}: {e}") from None
    return symbols


def undefined_symbols(path: str | Path) -> list[str]:
    """The names a shared library imports (undefined symbols of its dynamic symbol table), in table
    order, without version suffixes."""
    return [name for name, defined in dynamic_symbols(path) if not defined]


def python_names(symbols: list[tuple[str, bool]]) -> list[str]:
    """The CPython C API names among a library's dynamic symbols (:func:`dynamic_symbols`), imported or
    defined (none for an honest candidate). A library that defines such a name and exports it is, once
    loaded into the interpreter's process, bound to the interpreter's own function of that name (the
    executable's symbols come first), so defining is as good as importing."""
    return [name for name, _defined in symbols if PYTHON_SYMBOL.match(name)]


def process_imports(symbols: list[tuple[str, bool]]) -> list[str]:
    """The process-starting functions among a library's imports (:data:`PROCESS_SYMBOL`; none for an
    honest candidate)."""
    return [name for name, defined in symbols if not defined and PROCESS_SYMBOL.match(name)]


def python_symbols(path: str | Path) -> list[str]:
    """:func:`python_names` of the library at ``path``."""
    return python_names(dynamic_symbols(path))


def process_symbols(path: str | Path) -> list[str]:
    """:func:`process_imports` of the library at ``path``."""
    return process_imports(dynamic_symbols(path))
