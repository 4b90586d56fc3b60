"""Presentation helpers of the curation workspace: the page templates, highlighted side-by-side diffs and
small formatters."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from pydantic import ValidationError
from pygments.formatters import HtmlFormatter
from pygments.lexers import CudaLexer
from pygments.token import STANDARD_TYPES, _TokenType

from search.protocols import INITIAL_TECHNIQUE

HERE = Path(__file__).resolve().parent
_LEXER = CudaLexer(stripnl=False, ensurenl=False)
HIGHLIGHT_CLASS = "hl"


def _css_class(token: _TokenType) -> str:
    # The shortest standard class of the token or of its nearest ancestor (Pygments' own naming).
    while token not in STANDARD_TYPES:
        token = token.parent
    return str(STANDARD_TYPES[token])


def highlighted_lines(code: str) -> list[Markup]:
    """`code` as CUDA-highlighted HTML, one entry per source line (tokens split at line ends)."""
    span = Markup('<span class="{}">{}</span>')  # Markup.format escapes what it inserts
    lines: list[list[Markup]] = [[]]
    for token, value in _LEXER.get_tokens(code):
        css = _css_class(token)
        for i, piece in enumerate(value.split("\n")):
            if i:
                lines.append([])
            if piece:
                lines[-1].append(span.format(css, piece) if css else escape(piece))
    if code.endswith("\n") and lines and not lines[-1]:
        lines.pop()
    return [Markup("").join(parts) for parts in lines]


@lru_cache(maxsize=1)
def highlight_css() -> str:
    """The stylesheet of the highlighting classes (Pygments' default style), scoped to `.hl`."""
    return str(HtmlFormatter(style="default").get_style_defs(f".{HIGHLIGHT_CLASS}"))


@dataclass(frozen=True)
class DiffRow:
    """One row of a side-by-side diff; a side is None where the other side's line has no counterpart."""

    kind: str  # equal, replace, delete, insert
    left_no: int | None
    left: Markup | None
    right_no: int | None
    right: Markup | None


@lru_cache(maxsize=256)
def side_by_side(before: str, after: str) -> tuple[DiffRow, ...]:
    """Rows of a line diff of `before` and `after`, each side highlighted as CUDA.

    Cached: highlighting is most of a review page's own time, and a curator steps back and forth.
    """
    a_lines, b_lines = before.splitlines(), after.splitlines()
    a_html, b_html = highlighted_lines(before), highlighted_lines(after)
    # The highlighter and splitlines() agree on line count except for odd line endings: pad to be safe.
    a_html += [Markup("")] * (len(a_lines) - len(a_html))
    b_html += [Markup("")] * (len(b_lines) - len(b_html))
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=a_lines, b=b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        span = max(i2 - i1, j2 - j1)
        for k in range(span):
            i, j = i1 + k, j1 + k
            left = i < i2
            right = j < j2
            # A replaced block longer on one side shows its extra lines as inserted (or deleted).
            kind = tag if left and right else ("insert" if right else "delete")
            rows.append(
                DiffRow(
                    kind=kind,
                    left_no=i + 1 if left else None,
                    left=a_html[i] if left else None,
                    right_no=j + 1 if right else None,
                    right=b_html[j] if right else None,
                )
            )
    return tuple(rows)


def fmt_speedup(value: float | None) -> str:
    """A speedup as "2.31×", or an en dash when there is none."""
    return "–" if value is None else f"{value:.2f}×"


def fmt_waited(since: datetime | None, now: datetime) -> str:
    """How long something has waited, in its two largest units ("3 d 4 h", "5 h 2 min", "12 min")."""
    if since is None:
        return "–"
    minutes = max(0, int((now - since).total_seconds() // 60))
    days, hours, mins = minutes // 1440, minutes // 60 % 24, minutes % 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {mins} min"
    return f"{mins} min" if mins else "under a minute"


def speedup_colour(value: float | None) -> str:
    """A colour for a verified speedup: grey without one, red below 1×, through amber to green at 4× and up."""
    if value is None:
        return "#9aa0a6"
    if value < 1.0:
        return "#d93025"
    steps = [(1.5, "#f29900"), (2.5, "#c5b300"), (4.0, "#7cb342")]
    for bound, colour in steps:
        if value < bound:
            return colour
    return "#188038"


# Properties holding embedding vectors (graphdb/models.py): 384 numbers nobody reads in a table.
VECTOR_PROPERTIES = frozenset({"embedding", "code_embedding", "candidate_embedding", "code_vector"})


def without_vectors(value: Any) -> Any:
    """A Cypher result value with the vector properties of its nodes and relationships left out.

    A node or relationship (a dict with `_labels` or `_type`, as graphdb.cypher_guard.to_json makes
    them) loses those properties and names them under `_left_out`; other values are walked as they are.
    """
    if isinstance(value, dict):
        entity = "_labels" in value or "_type" in value
        dropped = sorted(k for k in value if entity and k in VECTOR_PROPERTIES)
        kept = {k: without_vectors(v) for k, v in value.items() if k not in dropped}
        return {**kept, "_left_out": dropped} if dropped else kept
    if isinstance(value, list):
        return [without_vectors(v) for v in value]
    return value


def as_text(value: Any) -> str:
    """A value as readable JSON text (non-ASCII and `<>&` as themselves): the template escapes it once, as HTML."""
    return json.dumps(value, ensure_ascii=False, default=str)


def validation_problems(error: ValidationError, shown: int = 3) -> str:
    """The first problems of a validation error, each as "where: what", for a person to read."""
    parts = []
    for problem in error.errors()[:shown]:
        where = ".".join(str(p) for p in problem["loc"]) or "the file"
        parts.append(f"{where}: {problem['msg']}")
    more = error.error_count() - shown
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


# The pages of every feature (api/<feature>/ui.py) render from this one folder, with these filters.
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["speedup"] = fmt_speedup
templates.env.filters["speedup_colour"] = speedup_colour
templates.env.filters["as_text"] = as_text
templates.env.filters["waited"] = fmt_waited
templates.env.globals["INITIAL_TECHNIQUE"] = INITIAL_TECHNIQUE
