"""Getting source code out of model answers, and checking that the entry point survived."""

from __future__ import annotations

import re
from typing import Literal

from search.errors import CodeExtractionError

TaskKind = Literal["function", "kernel"]

_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "cc", "c", "h", "hpp", "cuh"}
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z+#]*)[^\n]*\n", re.MULTILINE)
_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
# What makes a program CUDA rather than serial C++: execution-space or memory-space qualifiers, a
# kernel launch, the built-in thread indices, a call into the CUDA runtime or driver API, or a CUDA
# header. Matched on whole words outside comments (a comment or a name like "barracuda" is not CUDA).
_CUDA_MARKERS = re.compile(
    r"\b__(?:global|device|host|shared|constant|managed)__\b|<<<|"
    r"\b(?:threadIdx|blockIdx|blockDim|gridDim|warpSize)\b|"
    r"\b(?:cuda|cu)[A-Z]\w*\s*\(|#\s*include\s*[<\"](?:cuda|cooperative_groups|cub/|thrust/)"
)
_CODE_START = re.compile(
    r"^\s*(#\s*(include|define|pragma|if)|extern\b|__global__|__device__|template\b|static\b|struct\b|"
    r"typedef\b|namespace\b|using\b|constexpr\b|inline\b|void\b|//|/\*)"
)


def _fenced_blocks(answer: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block; an unterminated last fence runs to the end."""
    blocks: list[tuple[str, str]] = []
    pos = 0
    while True:
        opening = _FENCE.search(answer, pos)
        if opening is None:
            return blocks
        closing = _CLOSE.search(answer, opening.end())
        end = closing.start() if closing else len(answer)
        blocks.append((opening.group(1).lower(), answer[opening.end() : end]))
        if closing is None:
            return blocks
        pos = closing.end()


def _unfenced_code(answer: str) -> str:
    # Drop leading prose up to the first line that looks like C++, and trailing prose after the
    # last line that ends a declaration, block or directive.
    lines = answer.splitlines()
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return ""
    end = start
    for i in range(start, len(lines)):
        stripped = lines[i].rstrip()
        if stripped.endswith(("}", ";")) or stripped.lstrip().startswith("#"):
            end = i
    return "\n".join(lines[start : end + 1]) + "\n"


def extract_code(answer: str, entry: str | None = None, kind: TaskKind = "function") -> str:
    """The source code in a model answer.

    Fenced blocks in a C/C++/CUDA language (or none) are preferred; among them the last one that
    defines `entry` (models revise themselves, and a later block is usually the final version), else
    the longest. An unterminated fence (a truncated answer) runs to the end. Without fences, the
    answer is trimmed of surrounding prose. Raises `CodeExtractionError` when nothing looks like code.
    """
    blocks = [body for lang, body in _fenced_blocks(answer) if lang in _CODE_LANGS and body.strip()]
    if blocks:
        if entry is not None:
            defining = [b for b in blocks if defines_entry(b, entry, kind)]
            if defining:
                return defining[-1]
        return max(blocks, key=len)
    code = _unfenced_code(answer)
    if not code.strip():
        raise CodeExtractionError("the answer contains no code")
    return code


def is_serial_cpp(code: str) -> bool:
    """Whether `code` is plain (serial) C++: no CUDA construct outside its comments."""
    return _CUDA_MARKERS.search(_strip_comments(code)) is None


def _strip_comments(code: str) -> str:
    return _COMMENTS.sub(lambda m: " " * len(m.group(0)), code)


def _matching(code: str, open_at: int, opening: str, closing: str) -> int | None:
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == opening:
            depth += 1
        elif code[i] == closing:
            depth -= 1
            if depth == 0:
                return i
    return None


def _extern_c_blocks(code: str) -> list[tuple[int, int]]:
    spans = []
    for match in re.finditer(r'extern\s*"C"\s*\{', code):
        close = _matching(code, match.end() - 1, "{", "}")
        spans.append((match.end(), close if close is not None else len(code)))
    return spans


def _definitions(code: str, entry: str) -> list[tuple[int, str]]:
    """(position, declaration prefix) of every definition (with a body) of `entry`."""
    found = []
    for match in re.finditer(rf"\b{re.escape(entry)}\s*\(", code):
        close = _matching(code, match.end() - 1, "(", ")")
        if close is None:
            continue
        rest = code[close + 1 :].lstrip()
        rest = re.sub(r"^(noexcept|const|throw\s*\(\s*\))\s*", "", rest)
        if not rest.startswith("{"):
            continue
        boundary = max(code.rfind(c, 0, match.start()) for c in ";{}")
        found.append((match.start(), code[boundary + 1 : match.start()]))
    return found


def defines_entry(code: str, entry: str, kind: TaskKind = "function") -> bool:
    """Whether `code` defines `entry` as a function (any linkage) or a ``__global__`` kernel."""
    code = _strip_comments(code)
    if kind == "kernel":
        return any("__global__" in prefix for _, prefix in _definitions(code, entry))
    return bool(_definitions(code, entry))


def entry_point_preserved(code: str, entry: str, kind: TaskKind = "function") -> bool:
    """Whether the candidate still provides the task's entry point.

    Function tasks: `entry` is defined and has C linkage — ``extern "C"`` on the definition, on an
    earlier declaration, or an enclosing ``extern "C" { ... }`` block. Kernel tasks: `entry` is
    defined as a ``__global__`` function.
    """
    code = _strip_comments(code)
    definitions = _definitions(code, entry)
    if kind == "kernel":
        return any("__global__" in prefix for _, prefix in definitions)
    if not definitions:
        return False
    blocks = _extern_c_blocks(code)
    for position, prefix in definitions:
        if re.search(r'extern\s*"C"', prefix) or any(lo <= position < hi for lo, hi in blocks):
            return True
    # A prior `extern "C"` declaration gives the later definition C linkage too.
    declaration = re.compile(rf'extern\s*"C"\s*[^;{{}}()]*\b{re.escape(entry)}\s*\([^;{{}}]*\)\s*;')
    return declaration.search(code) is not None
