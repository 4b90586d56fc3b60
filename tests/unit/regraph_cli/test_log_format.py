"""`regraph up`'s console: text lines for a person at a terminal, JSON lines otherwise (issue 31)."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest

from api.logs import JsonFormatter, TextFormatter, choose_log_format


def _record() -> logging.LogRecord:
    record = logging.LogRecord("api.startup", logging.INFO, __file__, 1, "start-up: %s", ("ready",), None)
    record.seconds = 1.5
    return record


def test_a_terminal_gets_text_and_a_pipe_gets_json() -> None:
    main, side = os.openpty()  # a real terminal
    read_end, write_end = os.pipe()
    try:
        with open(side, "w", closefd=False) as tty, open(write_end, "w", closefd=False) as pipe:
            assert choose_log_format(None, tty) == "text"
            assert choose_log_format(None, pipe) == "json"
            assert choose_log_format("json", tty) == "json"  # --log-format / REGRAPH_LOG_FORMAT win
            assert choose_log_format("text", pipe) == "text"
    finally:
        for fd in (main, side, read_end, write_end):
            os.close(fd)
    closed = io.StringIO()
    closed.close()
    assert choose_log_format(None, closed) == "json"


def test_text_lines_keep_the_extra_fields_and_json_lines_parse() -> None:
    line = TextFormatter().format(_record())
    assert "INFO" in line and "api.startup: start-up: ready" in line and "seconds=1.5" in line
    assert not line.lstrip().startswith("{")
    entry = json.loads(JsonFormatter().format(_record()))
    assert entry["message"] == "start-up: ready" and entry["seconds"] == 1.5


def test_up_takes_the_flag_then_the_environment_then_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from api.settings import ApiSettings
    from regraph_cli.main import LogFormat, up_log_format

    monkeypatch.delenv("REGRAPH_LOG_FORMAT", raising=False)
    main, side = os.openpty()
    try:
        with open(side, "w", closefd=False) as tty:
            assert up_log_format(None, ApiSettings(), tty) == "text"  # the default is "json" in settings
            assert up_log_format(LogFormat.json, ApiSettings(), tty) == "json"
            monkeypatch.setenv("REGRAPH_LOG_FORMAT", "json")
            assert up_log_format(None, ApiSettings(), tty) == "json"
            assert up_log_format(LogFormat.text, ApiSettings(), tty) == "text"
    finally:
        os.close(main)
        os.close(side)
