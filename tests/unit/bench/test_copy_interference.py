"""bench.probes.copy_interference without a GPU: its arguments, its plan, its interference figures and
table, and its dry run (the GPU path needs pycuda and two GPUs: bench/device/run_copy_interference_x2.sh)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.probes import copy_interference as ci

SCRIPT = Path(ci.__file__)


def test_the_plan_puts_each_disturbed_row_after_its_alone_row() -> None:
    rows = ci.plan([64, 256], list(ci.KINDS))
    assert len(rows) == 16
    assert rows[:8] == [
        ci.PlannedRow(64, "pageable", None),
        ci.PlannedRow(64, "pageable", "pageable"),
        ci.PlannedRow(64, "pinned", None),
        ci.PlannedRow(64, "pinned", "pinned"),
        ci.PlannedRow(64, "registered", None),
        ci.PlannedRow(64, "registered", "registered"),
        ci.PlannedRow(64, "pageable", "pinned"),
        ci.PlannedRow(64, "pageable", "compute"),
    ]
    for i, row in enumerate(rows):
        if row.disturber is not None:
            assert ci.PlannedRow(row.size_mb, row.kind, None) in rows[:i]
    # without pageable memory, no cross rows (they measure pageable memory)
    assert ci.plan([8], ["pinned"]) == [
        ci.PlannedRow(8, "pinned", None),
        ci.PlannedRow(8, "pinned", "pinned"),
    ]


def test_the_arguments() -> None:
    args = ci.parse(["--sizes", "16, 32", "--kinds", "pinned,pageable", "--repeats", "5"])
    assert (args.sizes, args.kinds, args.repeats, args.device, args.disturber_device) == (
        [16, 32],
        ["pinned", "pageable"],
        5,
        0,
        1,
    )
    assert args.budget_s == 90.0 and args.out is None and not args.dry_run


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--sizes", "0"], "positive"),
        (["--sizes", "64,x"], "whole numbers"),
        (["--kinds", "pinned,shared"], "kinds are some of"),
        (["--repeats", "2"], "at least 3"),
        (["--device", "1"], "must differ"),
        (["--budget-s", "0"], "positive"),
    ],
)
def test_bad_arguments_exit_with_a_message(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as e:
        ci.parse(argv)
    assert e.value.code == 2
    assert says in capsys.readouterr().err


def _row(size: int, kind: str, disturber: str | None, median: float | None, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"size_mb": size, "kind": kind, "disturber": disturber, **extra}
    if median is not None:
        row["stats"] = ci.summary([median * 0.9, median, median * 1.1])
    return row


def test_interference_is_against_the_same_size_and_kind_alone() -> None:
    rows = ci.interference(
        [
            _row(64, "pageable", None, 10.0),
            _row(64, "pageable", "pageable", 12.5),
            _row(64, "pinned", None, 4.0),
            _row(64, "pinned", "pinned", 4.0),
            _row(64, "pageable", "compute", 9.0),
            _row(256, "pageable", "pageable", 50.0),  # its alone row is missing
            _row(64, "registered", None, None, error="failed: LogicError: cuMemHostRegister failed"),
            _row(64, "registered", "registered", None, error="failed: the same"),
        ]
    )
    assert [r.get("interference") for r in rows] == [
        None,
        pytest.approx(0.25),
        None,
        pytest.approx(0.0),
        pytest.approx(-0.1),
        None,
        None,
        None,
    ]
    assert "interference" not in rows[0]  # alone rows get none


def test_the_table() -> None:
    rows = ci.interference(
        [
            _row(64, "pageable", None, 10.0),
            _row(
                64,
                "pageable",
                "pinned",
                12.5,
                disturber_report={"ops": 40, "busy_s": 1.0, "gbps": 21.5, "what": "40 round trips"},
            ),
            _row(
                64,
                "pageable",
                "compute",
                10.0,
                disturber_report={"ops": 7, "gbps": 0.0, "what": "7 kernel loops"},
            ),
            _row(64, "registered", None, None, error="failed: LogicError: not supported"),
            _row(64, "registered", None, 4.0, register_ms=12.34),
        ]
    )
    lines = ci.table(rows).splitlines()
    assert lines.pop().startswith("| 64 | registered | alone (registered in 12.3 ms) | 4.000 |")
    assert lines[0].startswith("| MB | host memory")
    assert len(lines) == 2 + 4
    # 2 x 64 MiB in 10 ms: 13.4 GB/s; CoV of 9, 10, 11 is 0.082
    assert lines[2] == "| 64 | pageable | alone | 10.000 | 13.4 | 0.082 | 9.00-11.00 | - | - |"
    assert "| other GPU: pinned | 12.500 |" in lines[3] and "| +25.0 % | 40 ops, 21.5 GB/s |" in lines[3]
    assert lines[4].endswith("| +0.0 % | 7 kernel loops |")
    assert lines[5] == "| 64 | registered | alone | - | - | - | - | - | failed: LogicError: not supported |"


def test_the_summary() -> None:
    s = ci.summary([1.0, 2.0, 3.0, 10.0])
    assert s["n"] == 4 and s["median_ms"] == 2.5 and s["min_ms"] == 1.0 and s["max_ms"] == 10.0
    assert s["cov"] == pytest.approx(3.5355 / 4, rel=1e-4)


def test_the_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    # as the device script runs it: the file alone, from another directory, no PYTHONPATH needed
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--sizes", "64,256", "--out", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert "Plan: 16 rows of 30 round trips on GPU 0, disturbers on GPU 1" in done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 16
    assert all(line.endswith("| not measured |") for line in table[1:])
    assert list(tmp_path.iterdir()) == []  # nothing written, --out included


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed here")
def test_without_pycuda_the_measurement_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert ci.main(["--sizes", "8", "--repeats", "3"]) == 2
    err = capsys.readouterr().err
    assert "pycuda is not installed" in err and "--dry-run" in err


def test_lines_come_whole_however_they_are_written() -> None:
    """The parent and the disturber talk in lines over pipes: two lines in one write, a line in two
    writes, a deadline with nothing (or half a line) there, and the pipe's end."""
    read_fd, write_fd = os.pipe()
    try:
        lines = ci.Lines(read_fd)
        assert not lines.ready() and lines.read(0.05) is None
        os.write(write_fd, b"ready\nrunn")
        assert lines.ready() and lines.read(1.0) == "ready"
        assert lines.read(0.05) is None  # half a line: waits, then gives up
        os.write(write_fd, b'ing\n{"ops": 3}\n')
        assert lines.read(1.0) == "running"
        assert lines.ready() and lines.read(0) == '{"ops": 3}'
        os.close(write_fd)
        write_fd = -1
        assert lines.read(1.0) is None
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
