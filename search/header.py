"""The machine-readable header line that the step policy puts at the top of every user prompt.

Format: ``<!-- regraph: {"prompt": "step", "task": "saxpy", "technique": "Tiling", "step": 2} -->``
(compact JSON, sorted keys). The replay backend keys on it, so replayed answers never depend on the
retrieved example text that surrounds it.
"""

from __future__ import annotations

import json
import re
from typing import Any

_HEADER = re.compile(r"<!--\s*regraph:\s*(\{.*?\})\s*-->")


def format_header(fields: dict[str, Any]) -> str:
    """Render the header line for `fields` (JSON scalars only)."""
    return f"<!-- regraph: {json.dumps(fields, sort_keys=True, separators=(',', ':'))} -->"


def parse_header(text: str) -> dict[str, Any] | None:
    """The fields of the first header line in `text`, or None when `text` carries no header."""
    match = _HEADER.search(text)
    if match is None:
        return None
    try:
        fields = json.loads(match.group(1))
    except json.JSONDecodeError:
        return None
    return fields if isinstance(fields, dict) else None
