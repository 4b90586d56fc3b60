"""Logging for the API: one JSON object per line (for machines), or short text lines (for a person).

Both keep the `extra` fields. `regraph up` logs text on a terminal and JSON otherwise
(`choose_log_format`), unless told which (``--log-format``, ``REGRAPH_LOG_FORMAT``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as JSON: time, level, logger, message, then any `extra={...}` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _extras(record).items():
            entry[key] = value if isinstance(value, str | int | float | bool | None) else repr(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """Formats a record for a person: ``HH:MM:SS LEVEL logger: message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created).strftime("%H:%M:%S")
        line = f"{when} {record.levelname:<7} {record.name}: {record.getMessage()}"
        extras = " ".join(f"{key}={value}" for key, value in _extras(record).items())
        if extras:
            line += f"  {extras}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def choose_log_format(explicit: str | None, stream: IO[str]) -> str:
    """`explicit` when given, else text when `stream` is a terminal (a person reads it), else JSON."""
    if explicit is not None:
        return explicit
    try:
        return "text" if stream.isatty() else "json"
    except (AttributeError, ValueError):  # a closed or odd stream
        return "json"


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Configure the root logger once (idempotent): JSON lines or plain text on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_regraph", False):
            root.removeHandler(existing)
    handler._regraph = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("neo4j").setLevel(max(logging.WARNING, root.level))
