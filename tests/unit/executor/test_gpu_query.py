"""The executor's nvidia-smi queries (executor.gpuquery) against a fake ``nvidia-smi``: a real
executable on ``PATH`` that this test writes, answering like the real one, with bad output, hanging,
or absent. The three callers (the device's architecture, the GPUs' bus ids for a replica's cores, the
device's description) go through the one helper, with its one time limit and one error path."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from executor.app import query_gpu
from executor.compile import device_arch
from executor.errors import GpuQueryError
from executor.fleet.pinning import host_gpus
from executor.gpuquery import query_gpus

# Two H200s, answering ``--query-gpu=<fields> [--id=<i>] --format=csv,noheader,nounits`` as the real
# nvidia-smi does; MODE in the script's environment-free body chooses the behaviour.
FAKE = """#!{python}
import sys, time
MODE = {mode!r}
GPUS = [
    {{"index": "0", "name": "NVIDIA H200", "compute_cap": "9.0", "driver_version": "570.86.15",
      "memory.total": "143771", "pci.bus_id": "00000000:1B:00.0"}},
    {{"index": "1", "name": "NVIDIA H200", "compute_cap": "9.0", "driver_version": "570.86.15",
      "memory.total": "143771", "pci.bus_id": "00000000:2A:00.0"}},
]
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
open({log!r}, "a").write(" ".join(sys.argv[1:]) + "\\n")
if MODE == "hang":
    time.sleep(120)
if MODE == "setsid":  # a child outside its process group keeps the output pipe open
    import subprocess
    child = subprocess.Popen(["setsid", "sleep", "60"])
    open({log!r} + ".child", "w").write(str(child.pid))
    time.sleep(120)
if MODE == "stray":  # a driver's warning among the rows
    print("WARNING: infoROM is corrupted at gpu 0000:1B:00.0")
if MODE == "garbage":
    print("Unable to determine the device handle: Unknown Error")
    sys.exit(0)
if MODE == "failing":
    print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    sys.exit(9)
fields = args["query-gpu"].split(",")
for gpu in GPUS:
    if "id" in args and gpu["index"] != args["id"]:
        continue
    print(", ".join(gpu[f] if MODE in ("good", "stray") else "[N/A]" for f in fields))
"""


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> Path:
    """Put a fake nvidia-smi answering in ``mode`` first on PATH; the file it logs its calls to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE.format(python=sys.executable, mode=mode, log=str(log)))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_good_output_serves_every_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_smi(tmp_path, monkeypatch, "good")
    assert device_arch() == "sm_90"
    assert host_gpus() == [("0", "00000000:1B:00.0"), ("1", "00000000:2A:00.0")]
    assert query_gpu() == {
        "name": "NVIDIA H200",
        "compute_capability": "9.0",
        "driver": "570.86.15",
        "memory_total_mib": 143771,
    }
    assert query_gpu("1")["name"] == "NVIDIA H200"
    assert query_gpus(["index"], gpu_id="1") == [["1"]]
    calls = log.read_text().splitlines()
    assert len(calls) == 5 and all(c.endswith("--format=csv,noheader,nounits") for c in calls), calls


@pytest.mark.parametrize("mode", ["garbage", "failing", "unknown"])
def test_bad_output_is_an_error_and_no_gpu_for_the_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A line that is not one value per field, a failing status, or values that are not what was
    asked for ([N/A]): the helper says so; the callers answer as without a GPU, never raise."""
    fake_smi(tmp_path, monkeypatch, mode)
    if mode != "unknown":
        with pytest.raises(GpuQueryError):
            query_gpus(["index", "pci.bus_id"])
    assert device_arch() is None
    assert host_gpus() == []
    if mode == "unknown":
        assert query_gpu()["memory_total_mib"] is None  # described as far as it says
    else:
        assert query_gpu() == {}


def test_a_hung_nvidia_smi_is_killed_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = fake_smi(tmp_path, monkeypatch, "hang")
    began = time.monotonic()
    with pytest.raises(GpuQueryError, match="did not answer within 1s"):
        query_gpus(["compute_cap"], timeout_s=1.0)
    assert time.monotonic() - began < 10
    assert log.read_text().strip()  # it did start


def test_a_child_holding_the_pipe_does_not_hold_the_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 30 F4: after the group was killed, the wait for its output had no limit, and a child outside
    the group (``setsid``) that kept the pipe held the query, and the executor's start, as long as it
    lived."""
    log = fake_smi(tmp_path, monkeypatch, "setsid")
    began = time.monotonic()
    try:
        with pytest.raises(GpuQueryError, match="did not answer within 1s"):
            query_gpus(["compute_cap"], timeout_s=1.0)
        assert time.monotonic() - began < 15
    finally:
        child = Path(str(log) + ".child")
        if child.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child.read_text()), signal.SIGKILL)


def test_a_stray_line_is_skipped_not_taken_as_no_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review 30 F4: one line that is not one value per field (an infoROM warning) made the whole query
    fail, and the executor took the host for one without a GPU."""
    fake_smi(tmp_path, monkeypatch, "stray")
    assert query_gpus(["index", "pci.bus_id"]) == [["0", "00000000:1B:00.0"], ["1", "00000000:2A:00.0"]]
    assert device_arch() == "sm_90"
    assert host_gpus() == [("0", "00000000:1B:00.0"), ("1", "00000000:2A:00.0")]
    assert query_gpu()["name"] == "NVIDIA H200"


def test_without_nvidia_smi_every_query_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert query_gpus(["index"]) == []
    assert device_arch() is None and host_gpus() == [] and query_gpu() == {}
