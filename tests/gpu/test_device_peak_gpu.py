"""The device's figures for the physical floor, measured on the GPU by the executor's own worker
(executor.peak; issue 27, issue 33 item 3): the jailed measuring worker gets a CUDA context, the
figures are measured (not the datasheet's fallback), believed against the datasheet table, and kept as
the device's record, which reads back the same.

Run on the GPU machine: ``python -m pytest tests/gpu/test_device_peak_gpu.py -q -m gpu`` (a few
seconds: one worker start, one CUDA context, the copies).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from executor import floor, peak
from executor.sandbox import WorkerPool

pytestmark = pytest.mark.gpu

if importlib.util.find_spec("pycuda") is None or shutil.which("nvidia-smi") is None:
    pytest.skip("needs pycuda and an NVIDIA GPU", allow_module_level=True)


def test_the_executor_measures_the_gpu_in_a_worker_of_its_own(tmp_path: Path) -> None:
    pool = WorkerPool("gpu", prewarm=False)
    try:
        measured = peak.measure(pool)
        assert measured.source == "measured", measured.note
        assert floor.unbelievable(measured, measured.name) is None
        sheet = floor.datasheet_peak(measured.name)
        assert measured.dram_gbps > sheet.dram_gbps / 4, (measured, sheet)  # a real copy, not a stub
        assert measured.l2_bytes > 0 and measured.launch_us > 0
        # named as the candidate and baseline workers name the device (the baseline store's key)
        assert measured.model.startswith(f"{measured.name} (sm_"), measured.model
        kept = peak.device_peak(pool, tmp_path / "cache")
        assert kept.source == "measured"
        assert floor.stored_peak(tmp_path / "cache" / "device-peak", kept.name) == kept
    finally:
        pool.close()
