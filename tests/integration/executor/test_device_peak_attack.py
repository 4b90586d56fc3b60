"""A candidate cannot lower the physical floor of the candidates after it (issue 27; issue 33 item 3).

The floor (executor.floor) is computed from the device's measured bandwidths, kept as the device's
record under the executor's cache (``device-peak/``). Until this was fixed, the candidate worker
measured them and wrote the record itself, from the process that runs the candidate's code, with the
directory bound writable into its jail: a candidate could write a record of a much faster device, and
every later candidate's floor dropped until a memo of every answer passed as plausible. Now the
executor measures the device in a worker that loads no candidate's code (executor.peak), keeps the
record alone and hands the figures to the candidate workers in their jobs; a kept record is believed
only when plausible against the datasheet table.

Both tests run through the evaluator on the host runtime, in the namespace jail. The file calls go
through a function pointer, which the static check does not see (the jail is what stops them).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.evaluate import Evaluator
from executor.floor import stored_peak
from executor.jail import protection
from executor.protocol import CandidateSource
from executor.taskformat import FunctionTask, KernelTask, load_task, parse_task
from executor.verdict import DevicePeak, ErrorKind
from tests.integration.executor.test_executor_hacks_host import ALL_MEMO, SUM_BODY, SUM_HEAD, SUM_TASK
from tests.support.hostcode import FAST, host_evaluator

pytestmark = pytest.mark.skipif(protection() != "namespace", reason="no namespaces on this host")

TASKS_DIR = Path(__file__).parents[2] / "unit" / "executor" / "fixtures" / "tasks"
OPTIONS = FAST.model_copy(update={"min_trials": 5, "max_trials": 9})
# What a function task's source must hold besides its entry (a kernel it could launch).
STUB = "\n__global__ void stub_kernel() {}\nstatic void never_called() { stub_kernel<<<1, 1>>>(); }\n"
SAXPY = "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];"
# A record of a host a million times faster than any, with no cache: every floor near zero.
FAST_HOST = DevicePeak(
    name="host", dram_gbps=1e9, launch_us=0.0, h2d_gbps=1e9, d2h_gbps=1e9, host_gbps=1e9, host_cache_bytes=0
)


@pytest.fixture
def evaluator(tmp_path: Path) -> Iterator[Evaluator]:
    with host_evaluator(tmp_path / "cache") as built:
        yield built


def _writer(record: Path, planted: Path) -> str:
    """saxpy, right only when neither the device's record nor a new file beside it can be written; the
    record it tries to write is :data:`FAST_HOST`."""
    text = json.dumps(FAST_HOST.model_dump_json())
    return f"""#include <cstdio>
#include <cstring>
static bool refused(const char* path, const char* text) {{
    std::FILE* (*op)(const char*, const char*) = std::fopen;  // a pointer: no call the static check sees
    std::FILE* f = op(path, "w");
    if (f == nullptr) return true;
    std::fwrite(text, 1, std::strlen(text), f);
    std::fclose(f);
    return false;
}}
extern "C" void saxpy(int n, float a, const float* x, float* y) {{
    bool jailed = refused({json.dumps(str(record))}, {text});
    jailed = refused({json.dumps(str(planted))}, {text}) && jailed;
    for (int i = 0; i < n; ++i) y[i] = jailed ? a * x[i] + y[i] : -1.0f;
}}
{STUB}"""


def _sum_task() -> FunctionTask | KernelTask:
    return parse_task({**SUM_TASK, "reference_source": SUM_HEAD + SUM_BODY + " }"})


def test_a_candidate_cannot_write_the_device_record(evaluator: Evaluator, tmp_path: Path) -> None:
    saxpy = load_task(TASKS_DIR / "saxpy")
    honest = 'extern "C" void saxpy(int n, float a, const float* x, float* y) { ' + SAXPY + " }" + STUB
    first = evaluator.evaluate(saxpy, CandidateSource(source=honest), OPTIONS)
    assert first.passed, first.message
    record = tmp_path / "cache" / "device-peak" / "host.json"
    assert record.is_file() and stored_peak(record.parent, "host") is not None  # kept by the executor
    before = hashlib.sha256(record.read_bytes()).hexdigest()

    planted = record.parent / "planted.json"
    verdict = evaluator.evaluate(saxpy, CandidateSource(source=_writer(record, planted)), OPTIONS)
    assert hashlib.sha256(record.read_bytes()).hexdigest() == before, "a candidate rewrote the record"
    assert not planted.exists(), "a candidate wrote into the device's record"
    assert verdict.passed, verdict.message  # right only when both writes were refused


def test_a_planted_record_of_a_faster_device_does_not_lower_the_floor(
    evaluator: Evaluator, tmp_path: Path
) -> None:
    record = tmp_path / "cache" / "device-peak" / "host.json"
    record.parent.mkdir(parents=True)
    record.write_text(FAST_HOST.model_dump_json())  # as a candidate of an older version could
    assert stored_peak(record.parent, "host") is None  # not believed on read (GET /v1/device)

    verdict = evaluator.evaluate(_sum_task(), CandidateSource(source=ALL_MEMO + STUB), OPTIONS)
    assert verdict.error is ErrorKind.IMPLAUSIBLE, verdict.message
    assert verdict.floor is not None and verdict.floor.floor_ms is not None
    assert verdict.floor.measured_ms is not None and verdict.floor.measured_ms < verdict.floor.floor_ms
    kept = stored_peak(record.parent, "host")  # the executor's own measurement replaced it
    assert kept is not None and kept.host_gbps < FAST_HOST.host_gbps
